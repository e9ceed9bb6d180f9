"""Message store: CommitLog, ConsumeQueue, IndexFile on mmap, flush, recovery, retention."""
