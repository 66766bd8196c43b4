# cython: language_level=3
"""Per-request protocol checks, compiled. The twin in _protocol_py.py has the same signatures."""

# As in _protocol_py.py: Lua prints numbers from 1e14 on in exponent form (see there).
cdef long long MAX_DONE_BYTES = 10**13
cdef Py_ssize_t MAX_DOMAINS = 32


def valid_downloader(name):
    """Tell whether NAME matches ^[-_a-zA-Z0-9]{3,30}$ over the whole string."""
    cdef Py_ssize_t i, n
    cdef Py_UCS4 ch
    if type(name) is not str:
        return False
    n = len(<str>name)
    if n < 3 or n > 30:
        return False
    for i in range(n):
        ch = (<str>name)[i]
        if not ((ch >= u'a' and ch <= u'z') or (ch >= u'A' and ch <= u'Z')
                or (ch >= u'0' and ch <= u'9') or ch == u'-' or ch == u'_'):
            return False
    return True


def version_key(str version):
    """Turn a script version into a tuple of its numbers: '20240102.01' -> (20240102, 1)."""
    cdef list numbers = []
    cdef object current = None
    cdef long long fast = -1
    cdef Py_UCS4 ch
    for ch in version:
        if ch >= u'0' and ch <= u'9':
            if fast < 0:
                fast = 0
            if fast < 100000000000000000:
                fast = fast * 10 + (<long long>ch - 48)
            else:
                # Beyond 64 bits: carry on with Python integers so long numbers compare right.
                current = (fast if current is None else current) * 10 + (<long long>ch - 48)
                fast = 100000000000000000
        elif fast >= 0:
            numbers.append(fast if current is None else current)
            fast = -1
            current = None
    if fast >= 0:
        numbers.append(fast if current is None else current)
    return tuple(numbers)


def version_older(str version, str minimum):
    """Tell whether VERSION is older than MINIMUM, comparing numbers ('9' < '20240101.02')."""
    return version_key(version) < version_key(minimum)


def split_items(str text, Py_ssize_t max_items, Py_ssize_t max_length):
    """Split NUL-joined item names; None when there are too many or one is too long or empty."""
    cdef list names
    cdef str name
    if not text:
        return None
    names = text.split(u'\0')
    if len(names) > 1 and not names[len(names) - 1]:
        names.pop()
    if len(names) > max_items:
        return None
    for name in names:
        if not name or len(name) > max_length:
            return None
    return names


def flatten_bytes(value):
    """Turn {"domain": bytes, ...} into [domain, bytes, ...]; None when it is malformed."""
    cdef list flat = []
    cdef long long total = 0
    if type(value) is not dict or len(<dict>value) > MAX_DOMAINS:
        return None
    for domain, count in (<dict>value).items():
        if type(count) is not int or count < 0 or count >= MAX_DONE_BYTES:
            return None
        if not domain or len(domain) > 100:
            return None
        total += <long long>count
        flat.append(domain)
        flat.append(count)
    if total >= MAX_DONE_BYTES:
        return None
    return flat
