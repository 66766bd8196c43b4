"""What the tests share besides fixtures: paths, processes, the census, the browser and the real
warrior client's runner. Fixtures stay in tests/conftest.py; everything a test imports comes from here.
"""
