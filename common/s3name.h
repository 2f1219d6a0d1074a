/* common/s3name.h - S3's rule for bucket names, written once: the gateway
 * checks every request's bucket with it (both modes), the directory store
 * decides with it which directories are buckets, and conf checks a
 * configured cold_bucket with it. Pure function, any thread. */
#ifndef SHARDGATE_COMMON_S3NAME_H
#define SHARDGATE_COMMON_S3NAME_H

#include <stdbool.h>

/* True when `name` is a valid name for an S3 general purpose bucket: 3-63
 * characters of lower-case letters, digits, '.' and '-', a letter or digit
 * at both ends, no "..", ".-" or "-.", not formatted as an IPv4 address,
 * none of the prefixes xn--, sthree-, amzn-s3-demo- and none of the
 * suffixes -s3alias, --ol-s3, .mrap, --x-s3, --table-s3 (AWS reserves them
 * for its own names). */
bool sg_bucket_name_valid(const char *name);

#endif
