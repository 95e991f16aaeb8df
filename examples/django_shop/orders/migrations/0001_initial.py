from django.db import migrations, models


class Migration(migrations.Migration):
    initial = True
    dependencies = [("venturi", "0001_venturi_schema")]
    operations = [
        migrations.CreateModel(
            name="Order",
            fields=[
                ("id", models.BigAutoField(primary_key=True, serialize=False)),
                ("item", models.CharField(max_length=100)),
                ("shipped", models.BooleanField(default=False)),
                ("receipt", models.TextField(blank=True)),
            ],
        )
    ]
