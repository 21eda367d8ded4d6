"""Every lane's state at the cursor, and the host counters."""
