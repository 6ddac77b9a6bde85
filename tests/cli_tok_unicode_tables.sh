#!/usr/bin/env bash
# The committed Unicode tables (src/text/unicode_data.c, unicode_lower_data.c, unicode_nfd_data.c)
# are what their generator makes from Unicode 15.1 (unicodedata2==15.1.0, installed by
# scripts/install-deps.sh).
set -euo pipefail
python3 src/text/unicode_gen.py --check
