#!/bin/sh
# Builds SDT's kernel module for this machine's kernel, installs it and loads it, so
# that `sdt run --backend kmod` (and `--backend auto`) can use /dev/sdt.
#
#   sudo kmod/install.sh               with DKMS where it is installed (rebuilt for each
#                                      new kernel), else make + modules_install
#   sudo kmod/install.sh --make        make + modules_install, even where DKMS is present
#   sudo kmod/install.sh --uninstall   unload and remove it
#
# Needs the running kernel's headers (/lib/modules/$(uname -r)/build; on Debian and
# Ubuntu: apt-get install linux-headers-$(uname -r)), make and the kernel's compiler.
# Afterwards `cat /sys/class/misc/sdt/status` shows the module's counters.
set -eu

here=$(cd "$(dirname "$0")" && pwd)
kver=$(uname -r)
name=sdt
version=$(sed -n 's/^PACKAGE_VERSION="\(.*\)"/\1/p' "$here/dkms.conf")
mode=auto
case "${1:-}" in
    "") ;;
    --make) mode=make ;;
    --uninstall) mode=uninstall ;;
    -h | --help) sed -n '2,/^set -eu/{/^set -eu/d;s/^# \{0,1\}//;p}' "$0"; exit 0 ;;
    *) echo "kmod/install.sh: unknown argument '$1' (try --help)" >&2; exit 2 ;;
esac

die() { echo "kmod/install.sh: $*" >&2; exit 1; }
[ "$(id -u)" = 0 ] || die "run as root: sudo $0 $*"
[ -e /proc/modules ] || die "this kernel ($kver) has no loadable module support"

if [ "$mode" = uninstall ]; then
    if grep -q "^$name " /proc/modules; then
        rmmod "$name" || die "rmmod $name failed: is an sdt run still using /dev/sdt?"
    fi
    if command -v dkms >/dev/null && dkms status "$name/$version" 2>/dev/null | grep -q .; then
        dkms remove "$name/$version" --all
    fi
    rm -f "/lib/modules/$kver/updates/$name.ko"
    depmod -a "$kver"
    echo "kmod/install.sh: $name removed"
    exit 0
fi

[ -d "/lib/modules/$kver/build" ] ||
    die "no headers for kernel $kver in /lib/modules/$kver/build (Debian/Ubuntu: apt-get install linux-headers-$kver)"
command -v make >/dev/null || die "make is missing"

if [ "$mode" = auto ] && command -v dkms >/dev/null; then
    # DKMS copies the sources to /usr/src/NAME-VERSION and builds them there.
    rm -rf "/usr/src/$name-$version"
    mkdir -p "/usr/src/$name-$version"
    cp -r "$here"/Kbuild "$here"/Makefile "$here"/dkms.conf "$here"/*.c "$here"/*.h "$here"/include "/usr/src/$name-$version/"
    dkms remove "$name/$version" --all >/dev/null 2>&1 || true
    dkms add "$name/$version"
    dkms install "$name/$version" -k "$kver"
else
    make -C "$here" KDIR="/lib/modules/$kver/build"
    make -C "$here" KDIR="/lib/modules/$kver/build" install
    depmod -a "$kver"
fi

if grep -q "^$name " /proc/modules; then
    rmmod "$name" || die "an older $name is loaded and in use; stop the sdt runs using it and run this again"
fi
modprobe "$name"
[ -c /dev/sdt ] || die "$name loaded but /dev/sdt did not appear"
echo "kmod/install.sh: $name loaded: /dev/sdt is ready"
tr '\n' ' ' </sys/class/misc/sdt/status
echo
