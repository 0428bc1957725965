grep -qx ready /app/status.txt
