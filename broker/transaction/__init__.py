"""Transactional messages: half/op record bridge and the check-back service (docs/behaviours.md#transactions)."""
