# cython: language_level=3
"""Bloom-filter hashing for a batch, compiled. The twin in _bloom_py.py gives identical output."""
from libc.stdint cimport uint64_t
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize, PyBytes_GET_SIZE

cdef uint64_t FNV_OFFSET = 0xCBF29CE484222325ULL
cdef uint64_t FNV_PRIME = 0x100000001B3ULL
cdef uint64_t SEED_A = 0x9E3779B97F4A7C15ULL
cdef uint64_t SEED_B = 0xC2B2AE3D27D4EB4FULL
cdef uint64_t SEED_C = 0x165667B19E3779F9ULL


cdef inline uint64_t _fnv1a64(const unsigned char *data, Py_ssize_t n, uint64_t basis=FNV_OFFSET) nogil:
    cdef uint64_t h = basis
    cdef Py_ssize_t i
    for i in range(n):
        h = (h ^ data[i]) * FNV_PRIME
    return h


cdef inline uint64_t _fmix64(uint64_t h) nogil:
    h ^= h >> 33
    h *= 0xFF51AFD7ED558CCDULL
    h ^= h >> 33
    h *= 0xC4CEB9FE1A85EC53ULL
    h ^= h >> 33
    return h


cdef inline uint64_t _key_hash(key, uint64_t s0, uint64_t s1):
    """FNV-1a of a dedup key keyed with the salt (s0, s1) (see _bloom_py.keyed_hash): bytes as
    they are, str as UTF-8 (surrogateescape), else bytes()."""
    cdef bytes raw
    if type(key) is bytes:
        raw = <bytes>key
    elif isinstance(key, str):  # a str subclass too, as the pure twin (bytes() refuses a str)
        raw = str.encode(key, "utf-8", "surrogateescape")
    else:
        raw = bytes(key)
    return _fnv1a64(<const unsigned char *>PyBytes_AS_STRING(raw), PyBytes_GET_SIZE(raw), FNV_OFFSET ^ s0) ^ s1


def fnv1a64(data):
    """Hash DATA (bytes) with 64-bit FNV-1a."""
    cdef bytes b = bytes(data)
    return _fnv1a64(<const unsigned char *>PyBytes_AS_STRING(b), PyBytes_GET_SIZE(b))


def keyed_hash(data, salt=(0, 0)):
    """FNV-1a of DATA (bytes) keyed with SALT (s0, s1)."""
    return _key_hash(bytes(data), salt[0], salt[1])


def fmix64(uint64_t h):
    """Mix all bits of H (murmur3's finalizer)."""
    return _fmix64(h)


def layer_positions(uint64_t fingerprint, uint64_t seed, Py_ssize_t k, uint64_t chunks,
                    uint64_t chunk_bits):
    """Return (chunk, [k bit positions]) of a hashed key in one layer."""
    cdef uint64_t salt = seed + 1
    cdef uint64_t a = _fmix64(fingerprint ^ (SEED_A * salt))
    cdef uint64_t b = _fmix64(fingerprint ^ (SEED_B * salt))
    cdef Py_ssize_t i
    return (_fmix64(a ^ SEED_C) % chunks,
            [(a + <uint64_t>i * b) % chunk_bits for i in range(k)])


def script_args(entries, dedup_keys, layers, salt=(0, 0)):
    """Build the per-item ARGV of the backfeed script for a batch (see _bloom_py.script_args)."""
    cdef list out = []
    cdef list plan = [tuple(layer) for layer in layers]
    cdef Py_ssize_t n_layers = len(plan)
    cdef Py_ssize_t li, i, k
    cdef uint64_t fingerprint, layer_salt, a, b, chunks, chunk_bits
    cdef long long first_key
    cdef uint64_t s0 = salt[0], s1 = salt[1]
    for entry, key in zip(entries, dedup_keys):
        fingerprint = _key_hash(key, s0, s1)
        out.append(entry)
        for li in range(n_layers):
            seed_, k_, chunks_, chunk_bits_, first_key_ = <tuple>plan[li]
            layer_salt = <uint64_t>seed_ + 1
            k = k_
            chunks = chunks_
            chunk_bits = chunk_bits_
            first_key = first_key_
            a = _fmix64(fingerprint ^ (SEED_A * layer_salt))
            b = _fmix64(fingerprint ^ (SEED_B * layer_salt))
            out.append(first_key + <long long>(_fmix64(a ^ SEED_C) % chunks))
            for i in range(k):
                out.append(<unsigned long long>((a + <uint64_t>i * b) % chunk_bits))
    return out


cdef inline bytes _fingerprint(uint64_t h, Py_ssize_t slot_bytes):
    cdef unsigned char raw[8]
    cdef Py_ssize_t i
    for i in range(slot_bytes):
        raw[i] = (h >> (8 * i)) & 0xFF
    raw[0] = raw[0] % 255 + 1
    raw[slot_bytes - 1] = raw[slot_bytes - 1] % 255 + 1
    return PyBytes_FromStringAndSize(<char *>raw, slot_bytes)


def fingerprint(uint64_t h, Py_ssize_t slot_bytes):
    """SLOT_BYTES (1 to 8) bytes of H, first and last never 0 (see _bloom_py.fingerprint)."""
    if not 1 <= slot_bytes <= 8:
        raise ValueError("slot_bytes must be 1 to 8")
    return _fingerprint(h, slot_bytes)


def fingerprint_args(entries, dedup_keys, layers, salt=(0, 0)):
    """Build the per-item ARGV for a fingerprint filter (see _bloom_py.fingerprint_args)."""
    cdef list out = []
    cdef list plan = [tuple(layer) for layer in layers]
    cdef Py_ssize_t n_layers = len(plan)
    cdef Py_ssize_t li, slot_bytes
    cdef uint64_t h, layer_salt, a, b, chunks, buckets, size, first, second
    cdef long long first_key
    cdef uint64_t s0 = salt[0], s1 = salt[1]
    for layer in plan:
        if not 1 <= layer[1] <= 8:
            raise ValueError("slot_bytes must be 1 to 8")
    for entry, key in zip(entries, dedup_keys):
        h = _key_hash(key, s0, s1)
        out.append(entry)
        for li in range(n_layers):
            seed_, slot_bytes_, bucket_slots_, chunks_, buckets_, first_key_ = <tuple>plan[li]
            layer_salt = <uint64_t>seed_ + 1
            slot_bytes = slot_bytes_
            size = <uint64_t>slot_bytes * <uint64_t>bucket_slots_
            chunks = chunks_
            buckets = buckets_
            first_key = first_key_
            a = _fmix64(h ^ (SEED_A * layer_salt))
            b = _fmix64(h ^ (SEED_B * layer_salt))
            first = (a % buckets) * size
            second = (b % buckets) * size
            out.append(first_key + <long long>(_fmix64(a ^ SEED_C) % chunks))
            out.append(<unsigned long long>first)
            out.append(<unsigned long long>(first + size - 1))
            out.append(<unsigned long long>second)
            out.append(<unsigned long long>(second + size - 1))
            out.append(_fingerprint(_fmix64(b ^ SEED_C), slot_bytes))
    return out


def block_args(entries, dedup_keys, layers, salt=(0, 0)):
    """Build the per-item ARGV for a blocked fingerprint filter (see _bloom_py.block_args)."""
    cdef list out = []
    cdef list plan = [tuple(layer) for layer in layers]
    cdef Py_ssize_t n_layers = len(plan)
    cdef Py_ssize_t li, slot_bytes
    cdef uint64_t h, layer_salt, a, b, chunks, buckets, block, size, start, one, other, low, high
    cdef long long first_key, chunk
    cdef unsigned char info[4]
    cdef uint64_t s0 = salt[0], s1 = salt[1]
    for layer in plan:
        if not 1 <= layer[1] <= 8:
            raise ValueError("slot_bytes must be 1 to 8")
        if not 2 <= layer[6] <= 256 or layer[4] % layer[6]:
            raise ValueError("a block holds 2 to 256 buckets, and a chunk whole blocks")
        if layer[5] + layer[3] - 1 > 2**24 - 1:
            raise ValueError("a blocked layer's chunks must have KEYS indexes under 2**24")
    for entry, key in zip(entries, dedup_keys):
        h = _key_hash(key, s0, s1)
        out.append(entry)
        for li in range(n_layers):
            seed_, slot_bytes_, bucket_slots_, chunks_, buckets_, first_key_, block_ = <tuple>plan[li]
            layer_salt = <uint64_t>seed_ + 1
            slot_bytes = slot_bytes_
            size = <uint64_t>slot_bytes * <uint64_t>bucket_slots_
            chunks = chunks_
            buckets = buckets_
            block = block_
            first_key = first_key_
            a = _fmix64(h ^ (SEED_A * layer_salt))
            b = _fmix64(h ^ (SEED_B * layer_salt))
            start = (a % (buckets // block)) * block
            one = b % block
            other = (one + 1 + (b >> 32) % (block - 1)) % block
            low = one if one < other else other
            high = other if one < other else one
            chunk = first_key + <long long>(_fmix64(a ^ SEED_C) % chunks)
            out.append(<unsigned long long>((start + low) * size))
            out.append(<unsigned long long>((start + high) * size + size - 1))
            out.append(_fingerprint(_fmix64(b ^ SEED_C), slot_bytes))
            info[0] = <unsigned char>(high - low)
            info[1] = (chunk >> 16) & 0xFF
            info[2] = (chunk >> 8) & 0xFF
            info[3] = chunk & 0xFF
            out.append(PyBytes_FromStringAndSize(<char *>info, 4))
    return out
