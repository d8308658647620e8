"""python -m sinkops: which cores this install has and which backends run here."""
from sinkops.build_info import main

main()
