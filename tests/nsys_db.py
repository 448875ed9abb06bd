"""The Nsight Systems SQLite tables the synthetic exports of the tests share (the columns simcore's reader
uses, as `nsys export --type sqlite` names them)."""

NSYS_CORE_TABLES = """
    CREATE TABLE StringIds(id INTEGER PRIMARY KEY, value TEXT NOT NULL);
    CREATE TABLE CUPTI_ACTIVITY_KIND_KERNEL(start INT, end INT, deviceId INT, contextId INT, streamId INT,
      correlationId INT, globalPid INT, demangledName INT, shortName INT, gridX INT, gridY INT, gridZ INT,
      blockX INT, blockY INT, blockZ INT);
    CREATE TABLE CUPTI_ACTIVITY_KIND_RUNTIME(start INT, end INT, eventClass INT, globalTid INT,
      correlationId INT, nameId INT, returnValue INT);
"""
"""String ids, kernels and runtime calls."""
