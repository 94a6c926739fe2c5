package mountopts

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// def returns the default Config with f applied.
func def(f func(*Config)) Config {
	c := Config{Subtype: "vh5fs"}
	if f != nil {
		f(&c)
	}
	return c
}

func TestParse(t *testing.T) {
	tests := []struct {
		name string
		opts []string
		want Config
	}{
		{"no args", nil, def(nil)},
		{"empty string", []string{""}, def(nil)},
		{"only commas", []string{",,,"}, def(nil)},
		{"ro", []string{"ro"}, def(nil)},
		{"rw", []string{"rw"}, def(func(c *Config) { c.ReadWrite = true })},
		{"live", []string{"live"}, def(func(c *Config) { c.Live = true })},
		{"allow_delete", []string{"rw,allow_delete"}, def(func(c *Config) { c.ReadWrite, c.AllowDelete = true, true })},
		{"allow_other", []string{"allow_other"}, def(func(c *Config) { c.AllowOther = true })},
		{"debug", []string{"debug"}, def(func(c *Config) { c.Debug = true })},
		{"fsname", []string{"fsname=/data/x.h5"}, def(func(c *Config) { c.FSName = "/data/x.h5" })},
		{"subtype", []string{"subtype=h5"}, def(func(c *Config) { c.Subtype = "h5" })},
		{"commit_name", []string{"commit_name=v2"}, def(func(c *Config) { c.CommitName = "v2" })},
		{"commit_name 255 bytes", []string{"commit_name=" + strings.Repeat("a", 255)},
			def(func(c *Config) { c.CommitName = strings.Repeat("a", 255) })},
		{"commit_name with dots", []string{"commit_name=...v.1"}, def(func(c *Config) { c.CommitName = "...v.1" })},
		{"logfile", []string{"logfile=/var/log/vh5fs.log"}, def(func(c *Config) { c.LogFile = "/var/log/vh5fs.log" })},
		{"logfile later wins", []string{"logfile=/a,logfile=/b"}, def(func(c *Config) { c.LogFile = "/b" })},
		{"at", []string{"at=2024-01-01 02:30:00"}, def(func(c *Config) { c.At = "2024-01-01 02:30:00" })},
		{"stage_mem bytes", []string{"stage_mem=1000"}, def(func(c *Config) { c.StageMem, c.HasStageMem = 1000, true })},
		{"stage_mem zero", []string{"stage_mem=0"}, def(func(c *Config) { c.StageMem, c.HasStageMem = 0, true })},
		{"stage_mem K", []string{"stage_mem=4K"}, def(func(c *Config) { c.StageMem, c.HasStageMem = 4<<10, true })},
		{"stage_mem m", []string{"stage_mem=1m"}, def(func(c *Config) { c.StageMem, c.HasStageMem = 1<<20, true })},
		{"stage_mem G", []string{"stage_mem=2G"}, def(func(c *Config) { c.StageMem, c.HasStageMem = 2<<30, true })},
		{"stage_mem later wins", []string{"stage_mem=1M", "stage_mem=3M"}, def(func(c *Config) { c.StageMem, c.HasStageMem = 3<<20, true })},
		{"cache default dir", []string{"cache"}, def(func(c *Config) { c.Cache = true })},
		{"cache dir", []string{"cache=/var/cache/vh5fs"}, def(func(c *Config) { c.Cache, c.CacheDir = true, "/var/cache/vh5fs" })},
		{"cache_size", []string{"cache,cache_size=512M"}, def(func(c *Config) { c.Cache, c.CacheSize, c.HasCacheSize = true, 512<<20, true })},
		{"nopassthrough", []string{"cache,nopassthrough"}, def(func(c *Config) { c.Cache, c.NoPassthrough = true, true })},
		{"all vh5fs options", []string{"rw,live,allow_delete,allow_other,debug,fsname=f,subtype=s,commit_name=c"},
			Config{ReadWrite: true, Live: true, AllowDelete: true, AllowOther: true, Debug: true, FSName: "f", Subtype: "s", CommitName: "c"}},

		// repeated and conflicting options
		{"ro then rw", []string{"ro,rw"}, def(func(c *Config) { c.ReadWrite = true })},
		{"rw then ro", []string{"rw,ro"}, def(nil)},
		{"rw then ro across strings", []string{"rw", "ro"}, def(nil)},
		{"ro then rw across strings", []string{"ro,live", "rw"}, def(func(c *Config) { c.ReadWrite = true; c.Live = true })},
		{"repeated flag", []string{"live,live", "live"}, def(func(c *Config) { c.Live = true })},
		{"fsname later wins", []string{"fsname=a", "fsname=b"}, def(func(c *Config) { c.FSName = "b" })},
		{"subtype later wins", []string{"subtype=a,subtype=b"}, def(func(c *Config) { c.Subtype = "b" })},
		{"commit_name later wins", []string{"commit_name=a", "commit_name=b"}, def(func(c *Config) { c.CommitName = "b" })},

		// empty segments
		{"empty segments", []string{"ro,,live,"}, def(func(c *Config) { c.Live = true })},
		{"leading comma", []string{",debug"}, def(func(c *Config) { c.Debug = true })},

		// escapes
		{"escaped comma", []string{`fsname=a\,b`}, def(func(c *Config) { c.FSName = "a,b" })},
		{"escaped backslash", []string{`fsname=a\\b`}, def(func(c *Config) { c.FSName = `a\b` })},
		{"escaped backslash then comma", []string{`fsname=a\\,live`}, def(func(c *Config) { c.FSName = `a\`; c.Live = true })},
		{"escaped other char", []string{`fsname=a\b`}, def(func(c *Config) { c.FSName = "ab" })},
		{"trailing backslash kept", []string{`fsname=a\`}, def(func(c *Config) { c.FSName = `a\` })},
		{"equals in value", []string{"fsname=a=b"}, def(func(c *Config) { c.FSName = "a=b" })},
		{"escaped equals in value", []string{`fsname=a\=b`}, def(func(c *Config) { c.FSName = "a=b" })},
		{"escaped comma in commit_name", []string{`commit_name=v\,1,ro`}, def(func(c *Config) { c.CommitName = "v,1" })},
		{"escaped key char", []string{`l\ive`}, def(func(c *Config) { c.Live = true })},

		// ignored mount(8)/fstab options
		{"ignored fstab options",
			[]string{"defaults,auto,noauto,user,users,nouser,nofail,_netdev,loop,ro"}, def(nil)},
		{"ignored x- options", []string{"x-systemd.automount,x-gvfs-show,x-systemd.requires=/x,x-"}, def(nil)},
		{"ignored comment", []string{"comment=systemd.automount,comment,comment="}, def(nil)},
		{"ignored among real options", []string{"defaults,rw,nofail,x-a=b,live"},
			def(func(c *Config) { c.ReadWrite = true; c.Live = true })},

		// ownership and modes: vh5fs options
		{"uid", []string{"uid=1000"}, def(func(c *Config) { c.UID, c.HasUID = 1000, true })},
		{"uid 0", []string{"uid=0"}, def(func(c *Config) { c.HasUID = true })},
		{"uid max", []string{"uid=4294967295"}, def(func(c *Config) { c.UID, c.HasUID = 4294967295, true })},
		{"gid", []string{"gid=100"}, def(func(c *Config) { c.GID, c.HasGID = 100, true })},
		{"gid 0", []string{"gid=0"}, def(func(c *Config) { c.HasGID = true })},
		{"umask", []string{"umask=027"}, def(func(c *Config) { c.Umask = 0o027 })},
		{"umask without leading 0", []string{"umask=22"}, def(func(c *Config) { c.Umask = 0o022 })},
		{"umask 0777", []string{"umask=0777"}, def(func(c *Config) { c.Umask = 0o777 })},
		{"umask 0", []string{"umask=0"}, def(nil)},
		{"uid later wins", []string{"uid=1,gid=2", "uid=3"}, def(func(c *Config) { c.UID, c.HasUID, c.GID, c.HasGID = 3, true, 2, true })},
		{"umask later wins", []string{"umask=077,umask=002"}, def(func(c *Config) { c.Umask = 0o002 })},
		{"ownership not passed through", []string{"ro,uid=5,gid=6,umask=027,nodev"},
			def(func(c *Config) {
				c.UID, c.HasUID, c.GID, c.HasGID, c.Umask = 5, true, 6, true, 0o027
				c.Passthrough = []string{"nodev"}
			})},

		// access-time flags: mount(2) flags, later wins per flag
		{"atime set flags", []string{"noatime,nodiratime,relatime,strictatime,lazytime"},
			def(func(c *Config) { c.Atime = Atime{FlagSet, FlagSet, FlagSet, FlagSet, FlagSet} })},
		{"atime clear flags", []string{"atime,diratime,norelatime,nostrictatime,nolazytime"},
			def(func(c *Config) { c.Atime = Atime{FlagClear, FlagClear, FlagClear, FlagClear, FlagClear} })},
		{"atime later wins", []string{"noatime,atime", "noatime,relatime,norelatime"},
			def(func(c *Config) { c.Atime = Atime{NoAtime: FlagSet, Relatime: FlagClear} })},
		{"atime across strings", []string{"nodiratime", "diratime", "lazytime"},
			def(func(c *Config) { c.Atime = Atime{NoDiratime: FlagClear, Lazytime: FlagSet} })},

		// blksize: only for fuseblk, accepted and ignored
		{"blksize ignored", []string{"blksize=4096"}, def(nil)},
		{"blksize 0 ignored", []string{"ro,blksize=0,nodev"}, def(func(c *Config) { c.Passthrough = []string{"nodev"} })},

		// passthrough
		{"passthrough flags",
			[]string{"default_permissions,nosuid,suid,nodev,dev,exec,noexec,sync,async,dirsync"},
			def(func(c *Config) {
				c.Passthrough = []string{"default_permissions",
					"nosuid", "suid", "nodev", "dev", "exec", "noexec", "sync", "async", "dirsync"}
			})},
		{"passthrough values", []string{"max_read=131072"},
			def(func(c *Config) { c.Passthrough = []string{"max_read=131072"} })},
		{"passthrough mixed with options", []string{"nosuid,ro,nodev", "live,max_read=5"},
			def(func(c *Config) { c.Live = true; c.Passthrough = []string{"nosuid", "nodev", "max_read=5"} })},
		{"passthrough dedup flag", []string{"nosuid,nodev,nosuid"},
			def(func(c *Config) { c.Passthrough = []string{"nodev", "nosuid"} })},
		{"passthrough dedup keeps later-wins order", []string{"nosuid,suid", "nosuid"},
			def(func(c *Config) { c.Passthrough = []string{"suid", "nosuid"} })},
		{"passthrough dedup same value", []string{"max_read=1,sync,max_read=1"},
			def(func(c *Config) { c.Passthrough = []string{"sync", "max_read=1"} })},
		{"passthrough valued later wins", []string{"max_read=1,nodev", "max_read=2"},
			def(func(c *Config) { c.Passthrough = []string{"nodev", "max_read=2"} })},

		// the combination mount.fuse3 users write
		{"combination", []string{"ro,uid=1234,gid=2345,umask=027,noatime,nodiratime,relatime,blksize=4096,sync"},
			def(func(c *Config) {
				c.UID, c.HasUID, c.GID, c.HasGID, c.Umask = 1234, true, 2345, true, 0o027
				c.Atime = Atime{NoAtime: FlagSet, NoDiratime: FlagSet, Relatime: FlagSet}
				c.Passthrough = []string{"sync"}
			})},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Parse(tt.opts...)
			require.NoError(t, err)
			require.Equal(t, tt.want, got)
		})
	}
}

func TestParseErrors(t *testing.T) {
	tests := []struct {
		name string
		opts []string
		opt  string // option the message must name
	}{
		{"unknown option", []string{"foo"}, "foo"},
		{"unknown option with value", []string{"foo=bar"}, "foo"},
		{"unknown after valid", []string{"ro,live", "bogus"}, "bogus"},
		{"unknown case-sensitive", []string{"RO"}, "RO"},
		{"unknown near-ignored", []string{"xsystemd"}, "xsystemd"},
		{"unknown comment prefix", []string{"comments=x"}, "comments"},
		{"empty name", []string{"=x"}, "=x"},

		// flags given a value
		{"ro with value", []string{"ro=1"}, "ro"},
		{"rw with value", []string{"rw=1"}, "rw"},
		{"live with value", []string{"live=yes"}, "live"},
		{"allow_other with value", []string{"allow_other=1"}, "allow_other"},
		{"debug with empty value", []string{"debug="}, "debug"},
		{"passthrough flag with value", []string{"nosuid=1"}, "nosuid"},
		{"atime flag with value", []string{"noatime=1"}, "noatime"},
		{"lazytime with empty value", []string{"lazytime="}, "lazytime"},
		{"auto_unmount with value", []string{"auto_unmount=0"}, "auto_unmount"},

		// refused: the kernel does not know them
		{"allow_root", []string{"allow_other,allow_root"}, "allow_root"},
		{"auto_unmount", []string{"ro", "auto_unmount"}, "auto_unmount"},
		{"ignored flag with value", []string{"defaults=1"}, "defaults"},
		{"nofail with value", []string{"nofail=yes"}, "nofail"},

		// options needing a value
		{"fsname no value", []string{"fsname"}, "fsname"},
		{"fsname empty value", []string{"fsname="}, "fsname"},
		{"subtype no value", []string{"subtype"}, "subtype"},
		{"subtype empty value", []string{"subtype="}, "subtype"},
		{"commit_name no value", []string{"commit_name"}, "commit_name"},
		{"logfile no value", []string{"logfile"}, "logfile"},
		{"at no value", []string{"at"}, "at"},
		{"at empty value", []string{"at="}, "at"},
		{"logfile empty value", []string{"logfile="}, "logfile"},
		{"logfile relative", []string{"logfile=vh5fs.log"}, "logfile"},
		{"max_read no value", []string{"max_read"}, "max_read"},
		{"blksize empty value", []string{"blksize="}, "blksize"},
		{"uid no value", []string{"uid"}, "uid"},
		{"gid no value", []string{"gid"}, "gid"},
		{"umask no value", []string{"umask"}, "umask"},

		// invalid passthrough values
		{"max_read not a number", []string{"max_read=big"}, "max_read"},
		{"blksize negative", []string{"blksize=-1"}, "blksize"},
		{"uid signed", []string{"uid=+1"}, "uid"},
		{"gid hex", []string{"gid=0x10"}, "gid"},
		{"uid too large", []string{"uid=4294967296"}, "uid"},
		{"uid negative", []string{"uid=-1"}, "uid"},
		{"gid not a number", []string{"gid=staff"}, "gid"},
		{"blksize not a number", []string{"blksize=4k"}, "blksize"},
		{"umask negative", []string{"umask=-1"}, "umask"},
		{"umask not octal", []string{"umask=088"}, "umask"},
		{"umask too large", []string{"umask=1000"}, "umask"},

		// invalid sizes
		{"cache relative", []string{"cache=cachedir"}, "cache"},
		{"cache empty", []string{"cache="}, "cache"},
		{"cache_size zero", []string{"cache,cache_size=0"}, "cache_size"},
		{"cache_size no value", []string{"cache_size"}, "cache_size"},
		{"nopassthrough value", []string{"nopassthrough=1"}, "nopassthrough"},
		{"stage_mem no value", []string{"stage_mem"}, "stage_mem"},
		{"stage_mem empty", []string{"stage_mem="}, "stage_mem"},
		{"stage_mem only suffix", []string{"stage_mem=M"}, "stage_mem"},
		{"stage_mem negative", []string{"stage_mem=-1M"}, "stage_mem"},
		{"stage_mem unknown suffix", []string{"stage_mem=1T"}, "stage_mem"},
		{"stage_mem fraction", []string{"stage_mem=1.5G"}, "stage_mem"},
		{"stage_mem overflows", []string{"stage_mem=9999999999G"}, "stage_mem"},

		// invalid commit names
		{"commit_name empty", []string{"commit_name="}, "commit_name"},
		{"commit_name slash", []string{"commit_name=a/b"}, "commit_name"},
		{"commit_name only slash", []string{"commit_name=/"}, "commit_name"},
		{"commit_name dot", []string{"commit_name=."}, "commit_name"},
		{"commit_name dotdot", []string{"commit_name=.."}, "commit_name"},
		{"commit_name reserved", []string{"commit_name=__first_version__"}, "commit_name"},
		{"commit_name NUL", []string{"commit_name=a\x00b"}, "commit_name"},
		{"commit_name too long", []string{"commit_name=" + strings.Repeat("a", 256)}, "commit_name"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse(tt.opts...)
			require.Error(t, err)
			require.Regexp(t, `^(unknown )?mount option `, err.Error())
			require.Contains(t, err.Error(), `"`+tt.opt+`"`)
		})
	}
}

func TestUnknownOptionMessage(t *testing.T) {
	_, err := Parse("ro", "foo")
	require.EqualError(t, err, `unknown mount option "foo"`)
}

// TestRefusedOptionMessages: allow_root and auto_unmount get one line saying what to use.
func TestRefusedOptionMessages(t *testing.T) {
	tests := []struct{ opts, want string }{
		{"allow_root", `mount option "allow_root" is not supported: use allow_other,umask=077 (only the owner and root get in)`},
		{"ro,allow_root,allow_other", `mount option "allow_root" is not supported: use allow_other,umask=077 (only the owner and root get in)`},
		{"auto_unmount", `mount option "auto_unmount" is not supported: vh5fs unmounts on Ctrl-C and SIGTERM; after a crash, umount the mount point`},
	}
	for _, tt := range tests {
		t.Run(tt.opts, func(t *testing.T) {
			_, err := Parse(tt.opts)
			require.EqualError(t, err, tt.want)
			require.NotContains(t, err.Error(), "\n")
		})
	}
}

func TestErrorReturnsZeroConfig(t *testing.T) {
	c, err := Parse("rw,live,fsname=x", "nope")
	require.Error(t, err)
	require.Equal(t, Config{}, c)
}

func TestValidateCommitName(t *testing.T) {
	for _, ok := range []string{"v1", "a b", "...", ".hidden", "__first_version", strings.Repeat("é", 127)} {
		require.NoError(t, ValidateCommitName(ok), ok)
	}
	for _, bad := range []string{"", ".", "..", "/", "a/", "__first_version__", "\x00", strings.Repeat("é", 128)} {
		err := ValidateCommitName(bad)
		require.Error(t, err, "%q", bad)
		require.Contains(t, err.Error(), `"commit_name"`)
	}
}

func TestString(t *testing.T) {
	tests := []struct {
		name string
		cfg  Config
		want string
	}{
		{"default", def(nil), "ro"},
		{"zero value", Config{}, "ro"},
		{"rw", def(func(c *Config) { c.ReadWrite = true }), "rw"},
		{"all", Config{ReadWrite: true, Live: true, AllowOther: true, Debug: true, FSName: "f", Subtype: "s",
			CommitName: "c", UID: 1, HasUID: true, GID: 2, HasGID: true, Umask: 0o27,
			Atime: Atime{NoAtime: FlagSet, Relatime: FlagClear, Lazytime: FlagSet}, Passthrough: []string{"nodev", "max_read=4096"}},
			"rw,live,allow_other,debug,fsname=f,subtype=s,commit_name=c,uid=1,gid=2,umask=027,noatime,norelatime,lazytime,nodev,max_read=4096"},
		{"uid and gid 0", def(func(c *Config) { c.HasUID, c.HasGID = true, true }), "ro,uid=0,gid=0"},
		{"umask 0777", def(func(c *Config) { c.Umask = 0o777 }), "ro,umask=777"},
		{"atime flags cleared", def(func(c *Config) {
			c.Atime = Atime{FlagClear, FlagClear, FlagClear, FlagClear, FlagClear}
		}), "ro,atime,diratime,norelatime,nostrictatime,nolazytime"},
		{"escapes", def(func(c *Config) { c.FSName = `a,b\c=d`; c.CommitName = "v,2" }),
			`ro,fsname=a\,b\\c=d,commit_name=v\,2`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			require.Equal(t, tt.want, tt.cfg.String())
		})
	}
}

func TestStringRoundTrip(t *testing.T) {
	inputs := [][]string{
		nil,
		{"ro"},
		{"rw"},
		{"rw,ro"},
		{"rw,live,allow_other,debug"},
		{"fsname=/data/run 1.h5,subtype=h5fs"},
		{"subtype=vh5fs"},
		{`fsname=a\,b\\c,commit_name=x\,y=z`},
		{`fsname=trailing\`},
		{"commit_name=v2", "rw"},
		{`logfile=/tmp/a\,b.log`},
		{"at=2024-01-01 02:30:00+0100,ro"},
		{"defaults,nofail,x-systemd.automount,_netdev,comment=foo,ro"},
		{"default_permissions,noatime,atime,nodiratime,relatime,nosuid,suid,nodev,dev,exec,noexec,sync,async,dirsync"},
		{"max_read=131072,blksize=512,uid=0,gid=100,umask=027,noatime,uid=7"},
		{"uid=0,gid=0,umask=0"},
		{"umask=7,strictatime,nostrictatime,lazytime,diratime,norelatime"},
		{"ro,uid=1234,gid=2345,umask=027,noatime,nodiratime,relatime,blksize=4096,sync"},
		{"live,nosuid", "nodev,nosuid,debug"},
	}
	for _, in := range inputs {
		t.Run(strings.Join(in, "|"), func(t *testing.T) {
			c, err := Parse(in...)
			require.NoError(t, err)
			s := c.String()
			back, err := Parse(s)
			require.NoError(t, err, "String() = %q", s)
			require.Equal(t, c, back, "String() = %q", s)
			require.Equal(t, s, back.String(), "String is canonical")
		})
	}
}

func TestKernelOptions(t *testing.T) {
	cases := []struct {
		in   string
		want []string
	}{
		{"ro", nil},
		{"rw,nodev", []string{"nodev"}},
		{"allow_other", []string{"default_permissions"}},
		{"rw,allow_other,nosuid", []string{"nosuid", "default_permissions"}},
		{"default_permissions,allow_other,nodev", []string{"default_permissions", "nodev"}},
		{"uid=5,gid=6,umask=077,noatime,nodiratime,relatime,blksize=4096,sync", []string{"sync"}},
		{"allow_other,umask=077,dirsync", []string{"dirsync", "default_permissions"}},
	}
	for _, tc := range cases {
		t.Run(tc.in, func(t *testing.T) {
			c, err := Parse(tc.in)
			require.NoError(t, err)
			before := append([]string(nil), c.Passthrough...)
			got := c.KernelOptions()
			if len(tc.want) == 0 {
				require.Empty(t, got)
			} else {
				require.Equal(t, tc.want, got)
			}
			require.Equal(t, before, c.Passthrough, "Passthrough is left as parsed")
		})
	}
}

func TestStageMemBudget(t *testing.T) {
	c, err := Parse("rw")
	require.NoError(t, err)
	require.Equal(t, int64(DefaultStageMem), c.StageMemBudget())
	c, err = Parse("rw,stage_mem=1M")
	require.NoError(t, err)
	require.Equal(t, int64(1<<20), c.StageMemBudget())
	require.Equal(t, "rw,stage_mem=1M", c.String())
	c, err = Parse("stage_mem=1025")
	require.NoError(t, err)
	require.Equal(t, "ro,stage_mem=1025", c.String())
}

func TestCacheDefaults(t *testing.T) {
	for _, tc := range []struct {
		name, opts, dir string
		size            int64
	}{
		{"defaults", "cache", filepath.Join(os.Getenv("HOME"), ".cache", "vh5fs"), DefaultCacheSize},
		{"given", "cache=/c,cache_size=1G", "/c", 1 << 30},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("XDG_CACHE_HOME", "")
			c, err := Parse(tc.opts)
			require.NoError(t, err)
			dir, err := c.CacheDirectory()
			require.NoError(t, err)
			require.Equal(t, tc.dir, dir)
			require.Equal(t, tc.size, c.CacheBytes())
		})
	}
}
