#!/bin/sh
# /init of the rxe test guest (runs from the initramfs, busybox only).
# Loads the RDMA modules, mounts the host's root over 9p with the guest's own
# /proc, /sys and /dev and tmpfs over the directories a run may scribble in, then
# runs the job named on the kernel command line (rdma_asio.job=PATH) chrooted into
# the host root, and powers off. The job writes its own exit status.
export PATH=/bin:/sbin
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev

while read -r ko; do
    insmod "$ko" || echo "guest: insmod $ko failed"
done </modules.order

job= keep=
for arg in $(cat /proc/cmdline); do
    case "$arg" in
    rdma_asio.job=*) job=${arg#rdma_asio.job=} ;;
    rdma_asio.keep=*) keep=$(echo "${arg#rdma_asio.keep=}" | tr , ' ') ;;
    esac
done

# The root in 9p's mmap mode: reads and writes go to the host at once, as uncached;
# only pages a program maps (its code and data) stay in the guest's page cache, for
# as long as the guest keeps the file's inode. Uncached, every start of a program
# read the pages it touched through 9p again, one page per request: a sanitized
# sample's --help took 1.2 to 1.4 s instead of 0.6 (0.4 from the guest's tmpfs),
# eleven sanitized rxe tests 68 s instead of 51. A program rebuilt on the host is a
# new file (the linkers replace their output), which the guest maps afresh; a file
# rewritten in place while the guest maps it shows its old pages in the guest's maps
# until the last of them closes (read() sees the new bytes at once).
if mount -t 9p -o trans=virtio,version=9p2000.L,msize=512000,cache=mmap hostroot /host; then
    mount -o bind /proc /host/proc
    mount -o bind /sys /host/sys
    mount -o bind /dev /host/dev
    mount -t devpts devpts /host/dev/pts 2>/dev/null
    # The host's /usr (programs and libraries; /bin and /lib lead there), read-only and
    # cached in the guest: without a cache every program started reads its libraries
    # through 9p again (`ctest --version` took 2.3 s instead of 0.5). Nothing a run
    # writes is there; the trees and files a run reads or writes stay uncached.
    mount -t 9p -o trans=virtio,version=9p2000.L,msize=512000,cache=loose,ro hostusr /host/usr ||
        echo "guest: /usr stays uncached"
    mkdir -p /host/dev/shm
    # The host's own view of the scratch directories, for the kept paths below.
    mkdir -p /hosttmp
    mount -t tmpfs tmpfs /hosttmp
    for d in /run /tmp /var/tmp; do
        mkdir -p "/hosttmp$d"
        mount -o bind "/host$d" "/hosttmp$d"
    done
    for d in /run /tmp /var/tmp /dev/shm; do
        mount -t tmpfs -o mode=1777 tmpfs "/host$d"
    done
    # Paths the job needs (source and build trees, the run directory) stay the
    # host's even when they live under one of the scratch directories.
    for p in $keep; do
        for d in /run /tmp /var/tmp; do
            case "$p" in
            "$d"/*)
                mkdir -p "/host$p"
                mount -o bind "/hosttmp$p" "/host$p" || echo "guest: cannot keep $p"
                ;;
            esac
        done
    done
    if [ -n "$job" ]; then
        chroot /host /usr/bin/env -i \
            PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
            HOME=/tmp TERM=dumb LANG=C.UTF-8 RDMA_ASIO_IN_GUEST=1 \
            /bin/sh "$job"
    else
        echo "guest: no rdma_asio.job= on the kernel command line"
    fi
    sync
    for p in $keep; do umount "/host$p" 2>/dev/null; done
    for d in /dev/shm /var/tmp /tmp /run /dev/pts /dev /sys /proc /usr ""; do
        umount "/host$d" 2>/dev/null
    done
else
    echo "guest: cannot mount the host root over 9p"
fi
poweroff -f
