"""One module per request family, every family in one shape (Java's NettyRequestProcessor).

- A family is a class built from the BrokerController. One that answers its codes through one
  entry is a ``RequestProcessor`` registered as itself: ``process_request``, and
  ``reject_request`` while it turns requests away (send, pull, end transaction). One with a
  handler per code registers each method, ``(conn, request) -> ProcessorResult``.
- A handler answers ``request.response(code, remark)``. Input it cannot read refuses the request
  where it is found: a header raises from ``decode_header``, a body from
  ``JsonBody.decode_request``, any other refusal may raise ``RemotingCommandException(remark,
  code)``; the processor table answers each with its code and remark and logs it as a refusal.
- What runs around every request (ACL, rpc latency) is an RPC hook of the table; what runs
  around every send or pull (metrics) a SendMessageHook or ConsumeMessageHook (broker/mqtrace.py).

``BrokerController._register_processors`` lists every row, as Java's ``registerProcessor`` does.
"""
