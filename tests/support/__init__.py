"""What the tests share and venturi does not ship."""
