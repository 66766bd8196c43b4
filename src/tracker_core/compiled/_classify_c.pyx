# cython: language_level=3
"""Classify item names against limit patterns, compiled. Same API and results as _classify_py.py.

The tables (type and domain hashes, the prefix trie, the fallback regexes) come from the twin's
build_tables, so both index patterns identically and run the same RE2 sets (linear time); this
module only compiles the per-name walk.
"""
from cpython.dict cimport PyDict_GetItem
from cpython.ref cimport PyObject
from libc.stdint cimport uint32_t, uint64_t

from tracker_core.compiled._classify_py import TERMINALS, build_tables, name_bytes

cdef object TERMINALS_KEY = TERMINALS
cdef enum:
    GRAM_BUCKETS = 65536
    GRAM_BYTES = 8192


cdef inline uint32_t gram_bucket(uint32_t gram):
    # Multiplicative hashing spreads the packed q-gram over the bucket bits.
    return <uint32_t>((<uint64_t>gram * 2654435761u) >> 16) & (GRAM_BUCKETS - 1)


cdef inline str host_of(str name):
    """Return the lower-cased host of a URL or bare `host/path` name (see the twin)."""
    cdef Py_ssize_t n = len(name), start, end, i, at = -1, colon = -1
    cdef Py_UCS4 ch
    start = name.find(u"://")
    start = 0 if start < 0 else start + 3
    end = n
    for i in range(start, n):
        ch = name[i]
        if ch == u'/' or ch == u'?' or ch == u'#':
            end = i
            break
        if ch == u'@':
            at = i
    if at >= 0:
        start = at + 1
    for i in range(start, end):
        if name[i] == u':':
            colon = i
            break
    if colon >= 0:
        end = colon
    return name[start:end].lower()


cdef class Classifier:
    """Classify names against a fixed list of patterns (see _classify_py.Classifier)."""

    cdef readonly list patterns
    cdef readonly dict types
    cdef readonly dict domains
    cdef readonly dict trie
    cdef readonly list others
    cdef readonly list unfiltered
    cdef Py_ssize_t size
    # Fallback regexes are prefiltered by a q-gram of their required literal: one C pass over the
    # name tests a 64 Kbit table, so a name that contains none of the literals costs no Python
    # call at all. Regexes without a literal are always tried, in one RE2 pass (`unfiltered`).
    cdef int gram_length
    cdef uint32_t gram_mask
    cdef unsigned char gram_bits[GRAM_BYTES]
    cdef dict gram_candidates

    def __init__(self, patterns):
        cdef uint32_t gram, bucket
        self.patterns = list(patterns)
        self.types, self.domains, self.trie, self.others, self.unfiltered = \
            build_tables(self.patterns)
        self.size = len(self.patterns)
        lengths = [len(literal) for _, literal, _ in self.others if literal]
        self.gram_length = min(lengths + [4])
        self.gram_mask = 0xFFFFFFFF if self.gram_length == 4 else (1 << (8 * self.gram_length)) - 1
        self.gram_candidates = {}
        for i in range(GRAM_BYTES):
            self.gram_bits[i] = 0
        for entry in self.others:
            literal = entry[1]
            gram = 0
            for ch in literal[len(literal) - self.gram_length:]:
                gram = (gram << 8) | (ord(ch) & 0xFF)
            bucket = gram_bucket(gram & self.gram_mask)
            self.gram_bits[bucket >> 3] |= <unsigned char>(1 << (bucket & 7))
            self.gram_candidates.setdefault(bucket, []).append(entry)

    def __len__(self):
        return self.size

    cpdef long classify(self, str name):
        """Return the index of the first pattern NAME matches, or -1."""
        cdef Py_ssize_t best = self.size, index, n = len(name), i, colon, dot
        cdef PyObject *found
        cdef dict node
        cdef object terminals, regex, literal
        cdef object data = None    # the name's UTF-8 bytes, made once the first regex needs them
        cdef str host
        if self.types:
            colon = -1
            for i in range(n):
                if name[i] == u':':
                    colon = i
                    break
            if colon > 0:
                found = PyDict_GetItem(self.types, name[:colon])
                if found is not NULL and <object>found < best:
                    best = <object>found
        if self.domains:
            host = host_of(name)
            while host:
                found = PyDict_GetItem(self.domains, host)
                if found is not NULL and <object>found < best:
                    best = <object>found
                dot = host.find(u".")
                if dot < 0:
                    break
                host = host[dot + 1:]
        node = self.trie
        i = 0
        while node:
            found = PyDict_GetItem(node, TERMINALS_KEY)
            if found is not NULL:
                for index, regex in <list>found:
                    if index >= best:
                        continue
                    if regex is None:
                        best = index
                        continue
                    if data is None:
                        data = name_bytes(name)
                    if regex.Match(data):
                        best = index
            if i >= n:
                break
            found = PyDict_GetItem(node, <long>name[i])
            if found is NULL:
                break
            node = <dict>found
            i += 1
        if self.others:
            best = self._classify_others(name, best)
        if self.unfiltered:
            best = self._classify_unfiltered(name, best, data)
        return best if best < self.size else -1

    cdef Py_ssize_t _classify_unfiltered(self, str name, Py_ssize_t best, object data):
        cdef list indices
        cdef object regex_set, position
        for indices, regex_set in self.unfiltered:
            if <Py_ssize_t>indices[0] >= best:
                continue
            if data is None:
                data = name_bytes(name)
            for position in regex_set.Match(data):
                if <Py_ssize_t>indices[position] < best:
                    best = indices[position]
        return best

    cdef Py_ssize_t _classify_others(self, str name, Py_ssize_t best):
        cdef Py_ssize_t n = len(name), i, index
        cdef uint32_t gram = 0, bucket
        cdef int length = self.gram_length
        cdef object regex, literal, data = None
        for i in range(n):
            gram = (gram << 8) | (<uint32_t>name[i] & 0xFF)
            if i + 1 < length:
                continue
            bucket = gram_bucket(gram & self.gram_mask)
            if not (self.gram_bits[bucket >> 3] & (1 << (bucket & 7))):
                continue
            for index, literal, regex in <list>self.gram_candidates[bucket]:
                if index < best and literal in name:
                    if data is None:
                        data = name_bytes(name)
                    if regex.Match(data):
                        best = index
        return best

    def classify_many(self, names):
        """Return classify(name) for each of NAMES, in order."""
        cdef list out = []
        cdef str name
        for name in names:
            out.append(self.classify(name))
        return out
