"""BFCL (the Berkeley Function-Calling Leaderboard) in `alight eval --benchmark bfcl:CATEGORY`."""
