/* backend/posix_mpu_part.c - the parts of a multipart upload: file
 * "p00001".."p10000" of the upload directory, written like an object (temp
 * file, fsync, rename) by UploadPart and UploadPartCopy, read back with its
 * metadata, and listed in part-number order (ListParts). */
#include "posix_int.h"
#include "encoding.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static void part_name(unsigned part_no, char out[16])
{
    snprintf(out, 16, "p%05u", part_no);
}

/* posix_mpu_part_begin, with the upload's info in *ui when not NULL (the
 * caller clears ui->meta on success). */
static enum backend_status part_begin(struct posix_store *b, const char *bucket,
                                      const char *key, const char *upload_id, unsigned part_no,
                                      struct posix_upload_info *ui, struct posix_put **out)
{
    *out = NULL;
    if (b->read_only)
        return BACKEND_READ_ONLY;
    if (part_no < 1 || part_no > BACKEND_MAX_PARTS)
        return BACKEND_INVALID_PART;
    int ufd;
    enum backend_status s = posix_mpu_upload_open(b, bucket, key, upload_id, &ufd, ui);
    if (s != BACKEND_OK)
        return s;
    char pn[16];
    part_name(part_no, pn);
    s = posix_put_new(b, ufd, -1, pn, true, POSIX_MAX_PUT, out);
    if (s == BACKEND_OK)
        (*out)->part_no = part_no;
    else if (ui)
        obj_meta_clear(&ui->meta);
    return s;
}

enum backend_status posix_mpu_part_begin(struct posix_store *b, const char *bucket,
                                           const char *key, const char *upload_id,
                                           unsigned part_no, struct posix_put **out)
{
    return part_begin(b, bucket, key, upload_id, part_no, NULL, out);
}

enum backend_status posix_mpu_part_copy(struct posix_store *b, const char *bucket,
                                          const char *key, const char *upload_id,
                                          unsigned part_no, const struct backend_copy_src *src,
                                          struct obj_meta *out)
{
    if (out)
        memset(out, 0, sizeof *out);
    int sfd;
    struct stat st;
    enum backend_status s = posix_object_fd(b, src->bucket, src->key, &sfd, &st);
    if (s != BACKEND_OK)
        return s;
    uint64_t size = (uint64_t)st.st_size, off = 0, len = size;
    if (src->has_range) {
        if (src->first > src->last || src->last >= size) {
            close(sfd);
            return BACKEND_BAD_RANGE;
        }
        off = src->first;
        len = src->last - src->first + 1;
    }
    if (len > POSIX_MAX_PUT) {
        close(sfd);
        return BACKEND_TOO_LARGE;
    }
    /* An upload that declared a checksum algorithm gets the part's checksum
     * computed over the copied bytes, as S3 does, kept like UploadPart's. */
    struct posix_upload_info ui;
    struct posix_put *p;
    s = part_begin(b, bucket, key, upload_id, part_no, &ui, &p);
    if (s != BACKEND_OK) {
        close(sfd);
        return s;
    }
    const char *an = obj_meta_get_hdr(&ui.meta, "x-amz-checksum-algorithm");
    enum sg_ck_algo algo = an ? sg_ck_from_name(an) : SG_CK_NONE;
    obj_meta_clear(&ui.meta);
    struct sg_ck ck;
    if (sg_ck_init(&ck, algo) != 0) {
        close(sfd);
        posix_put_abort(p);
        return BACKEND_NOMEM;
    }
    unsigned char md5[16];
    backend_put_set_size(&p->base, len);   /* into the slab, when its slot fits */
    s = posix_copy_into(p, sfd, off, len, md5, &ck);
    close(sfd);
    struct obj_meta m = { 0 };
    if (s == BACKEND_OK && algo != SG_CK_NONE) {
        uint8_t d[32];
        char b64[48];
        size_t dl = sg_ck_final(&ck, d);
        sg_b64_encode(d, dl, b64);
        if (dl == 0 || obj_meta_add_hdr(&m, sg_ck_header(algo), b64) != 0)
            s = BACKEND_NOMEM;
    }
    sg_ck_free(&ck);
    if (s != BACKEND_OK) {
        obj_meta_clear(&m);
        posix_put_abort(p);
        return s;
    }
    posix_md5_to_hex(md5, m.etag);
    s = posix_put_commit(p, &m, out);
    obj_meta_clear(&m);
    return s;
}

/* Opens part `no` and reads its meta. */
enum backend_status posix_mpu_part_open(int ufd, unsigned no, struct posix_part_src *src,
                                        struct obj_meta *m)
{
    char pn[16];
    part_name(no, pn);
    memset(src, 0, sizeof *src);
    memset(m, 0, sizeof *m);
    src->fd = openat(ufd, pn, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    if (src->fd < 0)
        return errno == ENOENT ? BACKEND_INVALID_PART : BACKEND_IO;
    struct stat st;
    enum backend_status s = fstat(src->fd, &st) == 0 && S_ISREG(st.st_mode)
                                ? posix_meta_from_fd(src->fd, &st, m)
                                : BACKEND_INVALID_PART;
    if (s == BACKEND_OK)
        s = posix_slab_part_locate(ufd, src, &m->size);
    if (s != BACKEND_OK) {
        obj_meta_clear(m);
        close(src->fd);
        src->fd = -1;
    }
    return s;
}

/* The additional checksum a part was stored with (its x-amz-checksum-*
 * header, which UploadPart puts in the part's metadata), or "" for both. */
void posix_mpu_part_checksum(const struct obj_meta *m, char name[32], char value[96])
{
    name[0] = value[0] = '\0';
    for (size_t i = 0; i < m->n_hdrs; i++) {
        const char *n = m->hdrs[i].name;
        if (strncmp(n, "x-amz-checksum-", 15) == 0 && strlen(n) < 32 &&
            strlen(m->hdrs[i].value) < 96) {
            strcpy(name, n);
            strcpy(value, m->hdrs[i].value);
            return;
        }
    }
}

/* ---- list parts ---- */

void backend_parts_page_free(struct backend_parts_page *p)
{
    if (!p)
        return;
    free(p->parts);
    memset(p, 0, sizeof *p);
}

enum backend_status posix_mpu_list_parts(struct posix_store *b, const char *bucket,
                                           const char *key, const char *upload_id,
                                           unsigned marker, unsigned max_parts,
                                           struct backend_parts_page *out)
{
    memset(out, 0, sizeof *out);
    int ufd;
    enum backend_status s = posix_mpu_upload_open(b, bucket, key, upload_id, &ufd, NULL);
    if (s != BACKEND_OK)
        return s;
    if (max_parts > 1000)
        max_parts = 1000;
    /* Part numbers are 1..10000: a bitmap of what exists costs 1.25 KiB. */
    unsigned char seen[BACKEND_MAX_PARTS / 8 + 1] = { 0 };
    DIR *d = posix_dir_stream(ufd);
    out->parts = calloc(max_parts ? max_parts : 1, sizeof *out->parts);
    if (!d || !out->parts) {
        s = d ? BACKEND_NOMEM : BACKEND_IO;
        goto out;
    }
    struct dirent *de;
    while ((de = readdir(d)) != NULL) {
        unsigned no;
        char extra;
        if (de->d_name[0] != 'p' || strlen(de->d_name) != 6 ||
            sscanf(de->d_name, "p%5u%c", &no, &extra) != 1)
            continue;
        if (no >= 1 && no <= BACKEND_MAX_PARTS && no > marker)
            seen[no / 8] |= (unsigned char)(1u << (no % 8));
    }
    for (unsigned no = marker + 1; no <= BACKEND_MAX_PARTS; no++) {
        if (!(seen[no / 8] & (1u << (no % 8))))
            continue;
        struct posix_part_src src;
        struct obj_meta m;
        if (posix_mpu_part_open(ufd, no, &src, &m) != BACKEND_OK)
            continue;   /* replaced or gone meanwhile */
        close(src.fd);
        if (out->n_parts == max_parts) {
            obj_meta_clear(&m);
            out->truncated = max_parts > 0;
            break;
        }
        struct backend_part *bp = &out->parts[out->n_parts++];
        bp->part_no = no;
        memcpy(bp->etag, m.etag, sizeof bp->etag);
        bp->size = m.size;
        bp->mtime = m.mtime;
        posix_mpu_part_checksum(&m, bp->checksum_name, bp->checksum);
        out->next_marker = no;
        obj_meta_clear(&m);
    }
out:
    if (d)
        closedir(d);
    close(ufd);
    if (s != BACKEND_OK)
        backend_parts_page_free(out);
    return s;
}
