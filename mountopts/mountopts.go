// Package mountopts parses vh5fs "-o" mount option strings into a typed
// Config.
//
// Option strings follow the mount.fuse3 / mount(8) conventions: options are
// separated by commas, each option is either a flag ("key") or a
// "key=value" pair, "-o" may be given several times, and when an option is
// repeated the later occurrence wins. Empty segments ("ro,,live") are
// ignored. A backslash makes the following character literal, so a comma or
// backslash inside a value is written "\," or "\\" ("fsname=a\,b" gives
// "a,b"); a trailing backslash is kept as is (as libfuse does).
//
// vh5fs options:
//
//	ro              mount read-only (the default)
//	rw              mount read-write; "ro" and "rw" conflict and the later wins
//	live            follow an HDF5 SWMR writer, showing data as it is appended
//	allow_delete    (with rw) rmdir MNT/versions/NAME deletes the version, as
//	                vh5fs delete does; without it that rmdir answers EPERM
//	allow_other     let users other than the mounting user access the mount;
//	                implies default_permissions (see KernelOptions)
//	debug           trace FUSE operations
//	fsname=NAME     file system name shown in the mount table
//	                (default: empty, the caller uses the HDF5 file path)
//	subtype=TYPE    file system subtype shown as "fuse.TYPE" (default "vh5fs")
//	commit_name=N   name for the next committed version; N must be a valid
//	                single HDF5 link name: non-empty, at most 255 bytes, no
//	                "/" or NUL, and not ".", ".." or "__first_version__"
//	logfile=PATH    append every log line of the mount to PATH (absolute: a
//	                background mount runs in /)
//	at=TIME         show the file as it was at TIME (read-only); the caller
//	                parses TIME
//	stage_mem=SIZE  memory budget of the staged (written, not yet committed)
//	                chunks of all open files together; beyond it they spill
//	                to a file beside the HDF5 file. SIZE is bytes, or a number
//	                with the suffix K, M or G (KiB, MiB, GiB); 0 spills every
//	                chunk. Default 32M (DefaultStageMem).
//	cache[=DIR]     keep decoded copies of the committed versions' datasets read
//	                whole in DIR (default: the user's cache directory, see
//	                DefaultCacheDir), served by the kernel (FUSE passthrough)
//	cache_size=SIZE the cache directory's size (as stage_mem; default 2G,
//	                DefaultCacheSize); least recently used entries go
//	nopassthrough   serve cached datasets from the cache through vh5fs, not
//	                through the kernel's passthrough
//
// Ownership and modes, applied by vh5fs to every node it reports (libfuse's
// high-level library implements these; the kernel does not know them):
//
//	uid=N           owner of every file and directory (default: the mounting user)
//	gid=N           group of every file and directory (default: the mounting user's)
//	umask=NNN       permission bits cleared from every mode (octal, at most 0777;
//	                symlinks keep 0777)
//
// Access-time mount flags, given to mount(2) as flags (later wins for each flag):
//
//	atime, noatime, diratime, nodiratime, relatime, norelatime,
//	strictatime, nostrictatime, lazytime, nolazytime
//
// Kernel/FUSE options that vh5fs passes on unchanged (collected in
// Config.Passthrough):
//
//	default_permissions, nosuid, suid, nodev, dev,
//	exec, noexec, sync, async, dirsync   (flags)
//	max_read=N                           (N a non-negative decimal integer)
//
// Passthrough options keep the order in which they were given and are
// deduplicated: a repeated flag, or a repeated valued option (whatever its
// value), keeps only its last occurrence, at the position of that last
// occurrence, so later-wins semantics are preserved ("nosuid,suid,nosuid"
// becomes "suid,nosuid"; "max_read=1,max_read=2" becomes "max_read=2").
//
// "blksize=N" (N a non-negative decimal integer) is accepted and ignored: the
// kernel takes it only for block-device-backed FUSE mounts (fuseblk).
//
// "allow_root" and "auto_unmount" are refused with an error saying what to use
// instead: the kernel knows neither (libfuse implements allow_root in its
// library and auto_unmount in fusermount3), and vh5fs mounts with mount(2)
// itself; through go-fuse's fusermount3 fallback auto_unmount even leaves the
// mount unserved.
//
// Options that mount(8) and fstab put in the option string and that FUSE
// ignores are accepted and ignored: "defaults", "auto", "noauto", "user",
// "users", "nouser", "nofail", "_netdev", "loop", any option starting with
// "x-" (with or without a value), and "comment" / "comment=...".
//
// Any other option is an error naming it (`unknown mount option "foo"`).
// A flag given a value ("ro=1"), an option that needs a value given without
// one or with an empty one ("fsname", "fsname="), and an invalid value are
// errors that name the option as well, as a user reads them ("mount option ...": no package name).
package mountopts

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// DefaultSubtype is the Subtype used when no "subtype=" option is given.
const DefaultSubtype = "vh5fs"

// DefaultStageMem is the staged chunks' memory budget without "stage_mem=": with the
// daemon's other memory it keeps its peak RSS within 256 MiB for a write of any size.
const DefaultStageMem = 32 << 20

// DefaultCacheSize is the decoded cache's size without "cache_size=".
const DefaultCacheSize = 2 << 30

// CacheBytes is the decoded cache's size in bytes.
func (c Config) CacheBytes() int64 {
	if c.HasCacheSize {
		return c.CacheSize
	}
	return DefaultCacheSize
}

// StageMemBudget is the staged chunks' memory budget in bytes.
func (c Config) StageMemBudget() int64 {
	if c.HasStageMem {
		return c.StageMem
	}
	return DefaultStageMem
}

// Config is the parsed form of the vh5fs mount options.
type Config struct {
	ReadWrite     bool     // "rw" (default false: "ro")
	Live          bool     // "live": follow an HDF5 SWMR writer
	AllowDelete   bool     // "allow_delete": rmdir of a version deletes it (read-write mounts)
	AllowOther    bool     // "allow_other"
	Debug         bool     // "debug": trace FUSE operations
	FSName        string   // "fsname=..." (default: empty -> caller uses the file path)
	Subtype       string   // "subtype=..." default "vh5fs"
	CommitName    string   // "commit_name=..." name for the next committed version (optional)
	LogFile       string   // "logfile=PATH": where the mount's log lines go too (absolute)
	At            string   // "at=TIME": the moment to show the file as of (unparsed)
	StageMem      int64    // "stage_mem=SIZE": staged chunks' memory budget in bytes, when HasStageMem
	HasStageMem   bool     // a "stage_mem=" option was given (else DefaultStageMem)
	UID           uint32   // "uid=N": owner reported for every node, when HasUID
	HasUID        bool     // a "uid=" option was given (else: the mounting user)
	GID           uint32   // "gid=N": group reported for every node, when HasGID
	HasGID        bool     // a "gid=" option was given (else: the mounting user's group)
	Umask         uint32   // "umask=NNN": permission bits cleared from every mode but symlinks'
	Cache         bool     // "cache" or "cache=DIR": the decoded cache is on
	CacheDir      string   // "cache=DIR" (empty: the caller's default)
	CacheSize     int64    // "cache_size=SIZE" in bytes, when HasCacheSize
	HasCacheSize  bool     // a "cache_size=" option was given (else DefaultCacheSize)
	NoPassthrough bool     // "nopassthrough": cached datasets are served through vh5fs
	Atime         Atime    // access-time mount flags
	Passthrough   []string // kernel/FUSE options passed on unchanged, in order, deduplicated
}

// Flag is a mount flag that the options set, clear, or leave at the kernel's default.
type Flag int8

const (
	FlagDefault Flag = iota // not given
	FlagSet                 // e.g. "noatime"
	FlagClear               // e.g. "atime"
)

// Atime holds the access-time mount flags, each named after the mount(2) flag it
// sets (MS_NOATIME, MS_NODIRATIME, MS_RELATIME, MS_STRICTATIME, MS_LAZYTIME).
type Atime struct {
	NoAtime, NoDiratime, Relatime, Strictatime, Lazytime Flag
}

// atimeOptions maps each access-time flag to its set and clear option, in the order
// String renders them.
var atimeOptions = []struct {
	set, clear string
	flag       func(*Atime) *Flag
}{
	{"noatime", "atime", func(a *Atime) *Flag { return &a.NoAtime }},
	{"nodiratime", "diratime", func(a *Atime) *Flag { return &a.NoDiratime }},
	{"relatime", "norelatime", func(a *Atime) *Flag { return &a.Relatime }},
	{"strictatime", "nostrictatime", func(a *Atime) *Flag { return &a.Strictatime }},
	{"lazytime", "nolazytime", func(a *Atime) *Flag { return &a.Lazytime }},
}

// refused are options that mount.fuse3 users know but vh5fs cannot honour, with
// what to use instead.
var refused = map[string]string{
	"allow_root":   "use allow_other,umask=077 (only the owner and root get in)",
	"auto_unmount": "vh5fs unmounts on Ctrl-C and SIGTERM; after a crash, umount the mount point",
}

type optKind int

const (
	kindFlag           optKind = iota // vh5fs flag, no value
	kindValue                         // vh5fs option with a required value
	kindOwner                         // uid=, gid=: vh5fs option with a decimal value
	kindUmask                         // umask=: vh5fs option with an octal value
	kindAtime                         // access-time mount flag
	kindPassFlag                      // passthrough flag
	kindPassDecimal                   // passthrough with decimal value
	kindIgnoredFlag                   // mount(8)/fstab flag ignored
	kindIgnoredValue                  // mount(8)/fstab option ignored, value optional
	kindIgnoredDecimal                // ignored option with a decimal value (checked)
	kindRefused                       // known but not supported (refused)
	kindOptValue                      // vh5fs option with an optional value
)

var known = map[string]optKind{
	"ro":            kindFlag,
	"rw":            kindFlag,
	"live":          kindFlag,
	"allow_delete":  kindFlag,
	"allow_other":   kindFlag,
	"debug":         kindFlag,
	"fsname":        kindValue,
	"subtype":       kindValue,
	"commit_name":   kindValue,
	"logfile":       kindValue,
	"at":            kindValue,
	"stage_mem":     kindValue,
	"uid":           kindOwner,
	"gid":           kindOwner,
	"umask":         kindUmask,
	"cache":         kindOptValue,
	"cache_size":    kindValue,
	"nopassthrough": kindFlag,

	"default_permissions": kindPassFlag,
	"nosuid":              kindPassFlag,
	"suid":                kindPassFlag,
	"nodev":               kindPassFlag,
	"dev":                 kindPassFlag,
	"exec":                kindPassFlag,
	"noexec":              kindPassFlag,
	"sync":                kindPassFlag,
	"async":               kindPassFlag,
	"dirsync":             kindPassFlag,
	"max_read":            kindPassDecimal,

	"blksize":      kindIgnoredDecimal,
	"allow_root":   kindRefused,
	"auto_unmount": kindRefused,

	"defaults": kindIgnoredFlag,
	"auto":     kindIgnoredFlag,
	"noauto":   kindIgnoredFlag,
	"user":     kindIgnoredFlag,
	"users":    kindIgnoredFlag,
	"nouser":   kindIgnoredFlag,
	"nofail":   kindIgnoredFlag,
	"_netdev":  kindIgnoredFlag,
	"loop":     kindIgnoredFlag,
	"comment":  kindIgnoredValue,
}

func init() {
	for _, a := range atimeOptions {
		known[a.set] = kindAtime
		known[a.clear] = kindAtime
	}
}

func lookup(key string) (optKind, bool) {
	if strings.HasPrefix(key, "x-") {
		return kindIgnoredValue, true
	}
	k, ok := known[key]
	return k, ok
}

// reservedVersionName is the link name vh5fs reserves for the initial version.
const reservedVersionName = "__first_version__"

// maxLinkName is the longest commit name accepted, in bytes.
const maxLinkName = 255

// ValidateCommitName reports whether name is usable as a single HDF5 link
// name for a committed version.
func ValidateCommitName(name string) error {
	switch {
	case name == "":
		return fmt.Errorf("mount option %q: empty commit name", "commit_name")
	case len(name) > maxLinkName:
		return fmt.Errorf("mount option %q: commit name is %d bytes, at most %d allowed", "commit_name", len(name), maxLinkName)
	case strings.Contains(name, "/"):
		return fmt.Errorf("mount option %q: commit name %q contains \"/\"", "commit_name", name)
	case strings.ContainsRune(name, 0):
		return fmt.Errorf("mount option %q: commit name %q contains NUL", "commit_name", name)
	case name == "." || name == "..":
		return fmt.Errorf("mount option %q: commit name %q is not allowed", "commit_name", name)
	case name == reservedVersionName:
		return fmt.Errorf("mount option %q: commit name %q is reserved", "commit_name", name)
	}
	return nil
}

// split splits an option string on unescaped commas and removes the escapes:
// a backslash makes the next character literal; a trailing backslash is kept.
// Each returned segment reports whether its '=' separator (the first
// unescaped one) was present and where.
type segment struct {
	key, value string
	hasValue   bool
}

func split(s string) []segment {
	var segs []segment
	var key, val strings.Builder
	inValue := false
	flush := func() {
		if key.Len() > 0 || inValue {
			segs = append(segs, segment{key: key.String(), value: val.String(), hasValue: inValue})
		}
		key.Reset()
		val.Reset()
		inValue = false
	}
	cur := func() *strings.Builder {
		if inValue {
			return &val
		}
		return &key
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '\\' && i+1 < len(s):
			i++
			cur().WriteByte(s[i])
		case c == ',':
			flush()
		case c == '=' && !inValue:
			inValue = true
		default:
			cur().WriteByte(c)
		}
	}
	flush()
	return segs
}

// Parse parses one or more option strings in order into a Config. Later
// options override earlier ones. See the package documentation for the
// accepted options and the error cases.
func Parse(opts ...string) (Config, error) {
	c := Config{Subtype: DefaultSubtype}
	for _, s := range opts {
		for _, seg := range split(s) {
			if err := c.apply(seg); err != nil {
				return Config{}, err
			}
		}
	}
	return c, nil
}

func (c *Config) apply(seg segment) error {
	if seg.key == "" {
		return fmt.Errorf("mount option %q has an empty name", "="+seg.value)
	}
	kind, ok := lookup(seg.key)
	if !ok {
		return fmt.Errorf("unknown mount option %q", seg.key)
	}
	if kind == kindRefused {
		return fmt.Errorf("mount option %q is not supported: %s", seg.key, refused[seg.key])
	}
	switch kind {
	case kindFlag, kindAtime, kindPassFlag, kindIgnoredFlag:
		if seg.hasValue {
			return fmt.Errorf("mount option %q takes no value (got %q)", seg.key, seg.value)
		}
	case kindValue, kindOwner, kindUmask, kindPassDecimal, kindIgnoredDecimal:
		if !seg.hasValue || seg.value == "" {
			return fmt.Errorf("mount option %q needs a value", seg.key)
		}
	}

	switch kind {
	case kindIgnoredFlag, kindIgnoredValue:
		return nil
	case kindPassFlag:
		c.addPassthrough(seg.key, seg.key)
		return nil
	case kindPassDecimal, kindIgnoredDecimal, kindOwner:
		n, err := strconv.ParseUint(seg.value, 10, 32)
		if err != nil {
			return fmt.Errorf("mount option %q: invalid value %q (want a non-negative decimal integer)", seg.key, seg.value)
		}
		switch {
		case kind == kindPassDecimal:
			c.addPassthrough(seg.key, seg.key+"="+seg.value)
		case seg.key == "uid":
			c.UID, c.HasUID = uint32(n), true
		case seg.key == "gid":
			c.GID, c.HasGID = uint32(n), true
		}
		return nil
	case kindUmask:
		n, err := strconv.ParseUint(seg.value, 8, 32)
		if err != nil || n > 0o777 {
			return fmt.Errorf("mount option %q: invalid value %q (want an octal number up to 0777)", seg.key, seg.value)
		}
		c.Umask = uint32(n)
		return nil
	case kindAtime:
		for _, a := range atimeOptions {
			switch seg.key {
			case a.set:
				*a.flag(&c.Atime) = FlagSet
			case a.clear:
				*a.flag(&c.Atime) = FlagClear
			}
		}
		return nil
	}

	switch seg.key {
	case "ro":
		c.ReadWrite = false
	case "rw":
		c.ReadWrite = true
	case "live":
		c.Live = true
	case "allow_delete":
		c.AllowDelete = true
	case "allow_other":
		c.AllowOther = true
	case "debug":
		c.Debug = true
	case "fsname":
		c.FSName = seg.value
	case "subtype":
		c.Subtype = seg.value
	case "commit_name":
		if err := ValidateCommitName(seg.value); err != nil {
			return err
		}
		c.CommitName = seg.value
	case "logfile":
		if !strings.HasPrefix(seg.value, "/") {
			return fmt.Errorf("mount option %q: %q is not an absolute path", seg.key, seg.value)
		}
		c.LogFile = seg.value
	case "at":
		c.At = seg.value
	case "cache":
		if seg.hasValue && !strings.HasPrefix(seg.value, "/") {
			return fmt.Errorf("mount option %q: %q is not an absolute path", seg.key, seg.value)
		}
		c.Cache, c.CacheDir = true, seg.value
	case "cache_size":
		n, err := parseSize(seg.value)
		if err != nil || n == 0 {
			return fmt.Errorf("mount option %q: invalid size %q (want bytes, or a number with K, M or G, above 0)", seg.key, seg.value)
		}
		c.CacheSize, c.HasCacheSize = n, true
	case "nopassthrough":
		c.NoPassthrough = true
	case "stage_mem":
		n, err := parseSize(seg.value)
		if err != nil {
			return fmt.Errorf("mount option %q: %w", seg.key, err)
		}
		c.StageMem, c.HasStageMem = n, true
	}
	return nil
}

// parseSize parses a byte count: decimal digits, optionally followed by K, M or G (powers
// of 1024).
func parseSize(v string) (int64, error) {
	shift := 0
	switch v[len(v)-1] {
	case 'K', 'k':
		shift = 10
	case 'M', 'm':
		shift = 20
	case 'G', 'g':
		shift = 30
	}
	digits := v
	if shift > 0 {
		digits = v[:len(v)-1]
	}
	n, err := strconv.ParseUint(digits, 10, 63)
	if err != nil || digits == "" || n > (1<<63-1)>>shift {
		return 0, fmt.Errorf("invalid size %q (want bytes, or a number with K, M or G)", v)
	}
	return int64(n) << shift, nil
}

// formatSize renders n as parseSize reads it, with the largest exact suffix.
func formatSize(n int64) string {
	for _, u := range []struct {
		shift  uint
		suffix string
	}{{30, "G"}, {20, "M"}, {10, "K"}} {
		if n != 0 && n%(1<<u.shift) == 0 {
			return strconv.FormatInt(n>>u.shift, 10) + u.suffix
		}
	}
	return strconv.FormatInt(n, 10)
}

// addPassthrough appends opt, first removing any earlier entry with the same
// key so that only the last occurrence is kept.
func (c *Config) addPassthrough(key, opt string) {
	out := c.Passthrough[:0:0]
	for _, p := range c.Passthrough {
		k, _, _ := strings.Cut(p, "=")
		if k != key {
			out = append(out, p)
		}
	}
	c.Passthrough = append(out, opt)
}

// KernelOptions is the list of kernel/FUSE options for the mount: Passthrough, plus
// "default_permissions" when AllowOther is set and it is not already there. A FUSE mount
// without default_permissions leaves permission checks to the file system, and vh5fs makes
// none: with allow_other every user could then open every file for writing. With it the
// kernel checks each access against the mode, owner and group the nodes report.
func (c Config) KernelOptions() []string {
	out := append([]string(nil), c.Passthrough...)
	if !c.AllowOther {
		return out
	}
	for _, p := range out {
		if p == "default_permissions" {
			return out
		}
	}
	return append(out, "default_permissions")
}

// escape escapes backslashes and commas so that s survives split.
func escape(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '\\', ',':
			b.WriteByte('\\')
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// String renders the config as a canonical option string: "ro" or "rw",
// then live, allow_delete, allow_other, debug, fsname, subtype (only when not the
// default), commit_name, logfile, at, stage_mem, cache, cache_size, nopassthrough, uid, gid, umask (only when not 0), the access-time
// flags given (noatime/atime, nodiratime/diratime, relatime/norelatime,
// strictatime/nostrictatime, lazytime/nolazytime) and the passthrough options
// in order. Values are escaped so that Parse(c.String()) returns c for any
// Config returned by Parse.
func (c Config) String() string {
	var opts []string
	if c.ReadWrite {
		opts = append(opts, "rw")
	} else {
		opts = append(opts, "ro")
	}
	if c.Live {
		opts = append(opts, "live")
	}
	if c.AllowDelete {
		opts = append(opts, "allow_delete")
	}
	if c.AllowOther {
		opts = append(opts, "allow_other")
	}
	if c.Debug {
		opts = append(opts, "debug")
	}
	if c.FSName != "" {
		opts = append(opts, "fsname="+escape(c.FSName))
	}
	if c.Subtype != "" && c.Subtype != DefaultSubtype {
		opts = append(opts, "subtype="+escape(c.Subtype))
	}
	if c.CommitName != "" {
		opts = append(opts, "commit_name="+escape(c.CommitName))
	}
	if c.LogFile != "" {
		opts = append(opts, "logfile="+escape(c.LogFile))
	}
	if c.At != "" {
		opts = append(opts, "at="+escape(c.At))
	}
	if c.HasStageMem {
		opts = append(opts, "stage_mem="+formatSize(c.StageMem))
	}
	if c.Cache {
		if c.CacheDir != "" {
			opts = append(opts, "cache="+escape(c.CacheDir))
		} else {
			opts = append(opts, "cache")
		}
	}
	if c.HasCacheSize {
		opts = append(opts, "cache_size="+formatSize(c.CacheSize))
	}
	if c.NoPassthrough {
		opts = append(opts, "nopassthrough")
	}
	if c.HasUID {
		opts = append(opts, fmt.Sprintf("uid=%d", c.UID))
	}
	if c.HasGID {
		opts = append(opts, fmt.Sprintf("gid=%d", c.GID))
	}
	if c.Umask != 0 {
		opts = append(opts, fmt.Sprintf("umask=%03o", c.Umask))
	}
	for _, a := range atimeOptions {
		switch *a.flag(&c.Atime) {
		case FlagSet:
			opts = append(opts, a.set)
		case FlagClear:
			opts = append(opts, a.clear)
		}
	}
	opts = append(opts, c.Passthrough...)
	return strings.Join(opts, ",")
}

// CacheDirectory is the decoded cache's directory: "cache=DIR", else vh5fs/ in the user's
// cache directory ($XDG_CACHE_HOME, else ~/.cache).
func (c Config) CacheDirectory() (string, error) {
	if c.CacheDir != "" {
		return c.CacheDir, nil
	}
	d, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("mount option %q: no DIR given and %w", "cache", err)
	}
	return filepath.Join(d, "vh5fs"), nil
}
