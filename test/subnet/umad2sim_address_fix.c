/*
 * Preloaded into opensm by fabric.sh, before ibsim's libumad2sim.so.
 *
 * umad2sim hands each received MAD over in a malloc'ed buffer and fills in only
 * part of its address (struct ib_mad_addr): the P_Key index, and the GRH fields of
 * a MAD without a GRH, are whatever the heap held there. opensm keeps the address
 * of a SubnAdmSet(InformInfo) subscription and matches an unsubscribe to it by
 * comparing whole addresses, P_Key index included. With a stray byte there the SA
 * refuses the unsubscribe ("ERR 4307: Failed to UnSubscribe to non existing inform
 * object") and keeps the subscription: a client's orderly close failed now and
 * then with sa_request_refused. The kernel's umad always sets these fields.
 *
 * This read() clears them on umad2sim's descriptors (1024-2047, see umad2sim.c),
 * as the kernel would report a MAD received on P_Key index 0 without a GRH.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <string.h>
#include <sys/types.h>

#include <infiniband/umad.h>

typedef ssize_t (*read_fn)(int, void *, size_t);

ssize_t read(int fd, void *buf, size_t count) {
    static read_fn next_read;
    if (!next_read)
        next_read = (read_fn)dlsym(RTLD_NEXT, "read");
    const ssize_t n = next_read(fd, buf, count);
    if (fd >= 1024 && fd < 2048 && n >= (ssize_t)sizeof(struct ib_user_mad)) {
        ib_mad_addr_t *addr = &((struct ib_user_mad *)buf)->addr;
        addr->pkey_index = 0;
        if (!addr->grh_present) {
            addr->gid_index = 0;
            addr->hop_limit = 0;
            addr->traffic_class = 0;
            memset(addr->gid, 0, sizeof addr->gid);
            addr->flow_label = 0;
        }
        memset(addr->reserved, 0, sizeof addr->reserved);
    }
    return n;
}
