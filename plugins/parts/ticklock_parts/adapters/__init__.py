"""The product's adapters: its stores (SQLite, MongoDB) and the vendor's HTTP API."""
