/* common/hash.h - FNV-1a, the hash of names in the cache's in-memory tables,
 * and an integer mixer for ids
 * (the fill table, the index's shards and slots, a job's key map). Fast on
 * short strings and good enough where a table's chains stay short; not for
 * anything an attacker could aim at a single chain of (none of these: keys
 * are hashed into tables that grow). Pure functions, any thread. */
#ifndef SHARDGATE_COMMON_HASH_H
#define SHARDGATE_COMMON_HASH_H

#include <stddef.h>
#include <stdint.h>

#define SG_FNV1A_SEED 0xcbf29ce484222325ULL

/* FNV-1a of n bytes at p, continuing from h (SG_FNV1A_SEED to start). */
uint64_t sg_fnv1a(uint64_t h, const void *p, size_t n);

/* FNV-1a of the pair (a, b), a 0xff byte between them so that ("ab", "c")
 * and ("a", "bc") differ: a bucket and a key. */
uint64_t sg_fnv1a_pair(const char *a, size_t al, const char *b, size_t bl);

/* A 64-bit finalizer (MurmurHash3's fmix64): spreads an integer key, such
 * as a cache entry id, or a FNV-1a result, over every bit before a table
 * takes its low bits. */
static inline uint64_t sg_mix64(uint64_t h)
{
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdULL;
    h ^= h >> 33;
    h *= 0xc4ceb9fe1a85ec53ULL;
    h ^= h >> 33;
    return h;
}

#endif
