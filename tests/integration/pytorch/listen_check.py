"""ddp_check.py, after rank 0 has let the test look at its launcher's listening sockets: it writes
$ACC_LISTEN_CHECK_DIR/ready and waits (at most 120 s) for $ACC_LISTEN_CHECK_DIR/checked."""
import os
import time

import ddp_check

if __name__ == "__main__":
    folder = os.environ["ACC_LISTEN_CHECK_DIR"]
    if os.environ["RANK"] == "0":
        open(os.path.join(folder, "ready"), "w").close()
        deadline = time.monotonic() + 120
        while not os.path.exists(os.path.join(folder, "checked")) and time.monotonic() < deadline:
            time.sleep(0.05)
    ddp_check.main()
