"""The results store: a run's Parquet files and manifest, written crash-safely and read back.

``sink`` appends finished episodes; ``dataset`` reads them deduplicated;
``runs`` holds run manifests; ``schema`` the Arrow schemas; ``remote`` and
``transfer`` stage a run for an object store and pack it for a copy.
"""
