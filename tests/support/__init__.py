"""What the tests share besides fixtures: paths, processes, the census, the browser and the real
warrior client's runner, a project as the fixtures make it. Fixtures are in tests/conftest.py and,
for those only some files use, in fixtures.py (which conftest.py registers); everything a test
imports comes from here.
"""
