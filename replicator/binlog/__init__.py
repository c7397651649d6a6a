"""Sans-I/O binary log decoder: bytes in, typed events out.

Nothing in this package touches sockets, files, asyncio or logging. Callers feed bytes to a
framer (``packet.PacketFramer`` for the replication protocol, ``framing.FileFramer`` for files
on disk) and hand each whole event to ``parser.EventParser``.
"""
