"""`python -m tracker_api.cli`: how `tracker run` starts the live feed and the maintainer."""

from tracker_api.cli import main

main()
