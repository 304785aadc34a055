# apt-get for Debian 12's bookworm-backports through a private apt state in
# rdma_asio's cache, which knows only that suite: the system's sources and package
# lists stay as they are, and nothing is installed. apt checks what it downloads as
# always (the archive's signed index, and each package's SHA256 from it). Sourced
# (POSIX sh) by build-guest.sh, for a kernel package of bookworm-backports, and by
# scripts/fetch-boost, for Boost 1.83; both share the one state.
#
#   backports_apt_init CACHE   the state in CACHE/apt-bookworm-backports; status 1,
#                              with the reason on stderr, when it cannot be made
#   backports_apt ARG...       apt-get ARG... with that state (update, download)

backports_keyring=/usr/share/keyrings/debian-archive-keyring.gpg

backports_apt_init() {
    backports_state=$1/apt-bookworm-backports
    if [ ! -r "$backports_keyring" ]; then
        echo "bookworm-backports: needs Debian's archive keyring ($backports_keyring: apt-get install debian-archive-keyring)" >&2
        return 1
    fi
    if ! mkdir -p "$backports_state/etc/sources.list.d" "$backports_state/lists/partial" \
        "$backports_state/cache/archives/partial" 2>/dev/null; then
        echo "bookworm-backports: cannot write to $1 (set RDMA_ASIO_CACHE)" >&2
        return 1
    fi
    cat >"$backports_state/etc/sources.list.d/bookworm-backports.sources" <<EOF
Types: deb
URIs: http://deb.debian.org/debian
Suites: bookworm-backports
Components: main
Signed-By: $backports_keyring
EOF
}

backports_apt() {
    # As root, apt's downloads would run as _apt, which may not reach the cache.
    apt-get -q -o Dir::Etc::SourceList=/dev/null \
        -o Dir::Etc::SourceParts="$backports_state/etc/sources.list.d" \
        -o Dir::State::Lists="$backports_state/lists" -o Dir::Cache="$backports_state/cache" \
        -o Dir::State::status=/var/lib/dpkg/status -o APT::Sandbox::User=root "$@"
}
