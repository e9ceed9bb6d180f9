"""Transactional messages: half/op record bridge and the check-back service (behaviours.md §5)."""
