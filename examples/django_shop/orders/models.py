from django.db import models


class Order(models.Model):
    item = models.CharField(max_length=100)
    shipped = models.BooleanField(default=False)
    receipt = models.TextField(blank=True)
