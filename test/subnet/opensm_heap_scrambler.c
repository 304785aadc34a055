/*
 * Preloaded into opensm by one subnet test (fabric.sh's FABRIC_OSM_PRELOAD), after
 * umad2sim_address_fix.so: every malloc'ed block of about the size of umad2sim's
 * receive buffers is filled with a byte that changes from one block to the next.
 * What a busy heap may hold, made certain: without the address fix, each field
 * umad2sim leaves uninitialised differs between a subscription and its
 * unsubscribe, and opensm refuses the unsubscribe.
 */
#include <stddef.h>
#include <string.h>

extern void *__libc_malloc(size_t size);

static unsigned char next_byte;

void *malloc(size_t size) {
    void *p = __libc_malloc(size);
    if (p && size >= 200 && size <= 400)
        memset(p, ++next_byte, size);
    return p;
}
