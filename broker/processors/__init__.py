"""One module per request family, each a table of request code -> handler.

``BrokerController._register_processors`` lists every row, as Java's ``registerProcessor`` does.
"""
