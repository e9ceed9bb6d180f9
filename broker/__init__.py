"""Broker: processors, managers, registration, and the store behind them."""
