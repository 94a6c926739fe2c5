package fsnode

import (
	"errors"
	"fmt"
	"os"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/vh5fs/vh5fs/commit"
	"github.com/vh5fs/vh5fs/named"
	"github.com/vh5fs/vh5fs/stage"
	"github.com/vh5fs/vh5fs/versions"
	"github.com/vh5fs/vh5fs/xattrs"
)

func TestErrno(t *testing.T) {
	wrap := func(err error) error { return fmt.Errorf("stage s: old/x: %w", err) }
	for _, tc := range []struct {
		name string
		err  error
		want syscall.Errno
	}{
		{"no error", nil, 0},
		{"an errno, as writefile wraps one", fmt.Errorf("writefile: truncate: %w", syscall.EINVAL), syscall.EINVAL},
		{"an errno of the kernel", &os.PathError{Op: "write", Path: "spill", Err: syscall.ENOSPC}, syscall.ENOSPC},
		{"a missing file", fmt.Errorf("stages: %w", os.ErrNotExist), syscall.ENOENT},
		{"a missing version or dataset", wrap(versions.ErrNotFound), syscall.ENOENT},
		{"an unsupported dataset", wrap(versions.ErrUnsupported), syscall.EOPNOTSUPP},
		{"a missing xattr", xattrs.ErrMissing, syscall.ENODATA},
		{"a taken version name", fmt.Errorf("%w: r1", commit.ErrExists), syscall.EEXIST},
		{"a stage's commit on a taken name", fmt.Errorf("stage s: %w: %w", fmt.Errorf("%w: r1", commit.ErrExists), stage.ErrExist), syscall.EEXIST},
		{"a tag or branch named as a version", fmt.Errorf("tag v2: %w", named.ErrVersionName), syscall.EEXIST},
		{"stage: no such path", wrap(stage.ErrNotExist), syscall.ENOENT},
		{"stage: a taken name", wrap(stage.ErrExist), syscall.EEXIST},
		{"stage: an invalid spec", wrap(stage.ErrInvalid), syscall.EINVAL},
		{"stage: a group with contents", wrap(stage.ErrNotEmpty), syscall.ENOTEMPTY},
		{"stage: a dataset for a group", wrap(stage.ErrNotDir), syscall.ENOTDIR},
		{"stage: a group for a dataset", wrap(stage.ErrIsDir), syscall.EISDIR},
		{"stage: a changed stage rebased", wrap(stage.ErrBusy), syscall.EBUSY},
		{"stage: gone", wrap(stage.ErrStale), syscall.ESTALE},
		{"stage: a missing attribute", wrap(stage.ErrNoAttr), syscall.ENODATA},
		{"anything else", errors.New("H5Dread failed"), syscall.EIO},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, errno(tc.err))
		})
	}
}

// TestStageErrorTexts: a stage's sentinel error reads as strerror(3) of the errno it is
// answered with, so a logged error reads as the refusal the caller saw.
func TestStageErrorTexts(t *testing.T) {
	for _, err := range []error{stage.ErrNotExist, stage.ErrExist, stage.ErrInvalid, stage.ErrNotEmpty,
		stage.ErrNotDir, stage.ErrIsDir, stage.ErrBusy, stage.ErrStale} {
		require.Equal(t, errno(err).Error(), err.Error())
	}
}
