"""Run a command and print the peak RSS (KiB) of it and everything it waited for."""

import resource
import subprocess
import sys

done = subprocess.run(
    sys.argv[1:], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False
)
print(done.returncode, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)
