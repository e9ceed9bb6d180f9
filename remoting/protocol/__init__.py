"""Request/response headers, JSON bodies and the stored message record codec."""
