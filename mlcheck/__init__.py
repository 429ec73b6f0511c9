"""mlcheck: site-portable ReFrame checks for distributed PyTorch in containers."""

import os

# the checkout: config/, src/ and docs/ beside this package
REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
