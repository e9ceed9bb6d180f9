"""Python SDK: producers, consumers, admin, and the Spark connector."""
