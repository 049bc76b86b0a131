import sys

from clover.evals.bench.run import main

sys.exit(main())
