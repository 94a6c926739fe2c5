package stage

import "errors"

// Errors of a stage's operations, for errors.Is; package fsnode answers each with the
// errno named beside it. Each reads
// as strerror(3) of its errno, so a logged error reads as the refusal the caller saw.
var (
	ErrNotExist = errors.New("no such file or directory") // ENOENT: no such stage, group or dataset
	ErrExist    = errors.New("file exists")               // EEXIST: the name is taken
	ErrInvalid  = errors.New("invalid argument")          // EINVAL: a name, spec or value refused
	ErrNotEmpty = errors.New("directory not empty")       // ENOTEMPTY: a group or stage with contents
	ErrNotDir   = errors.New("not a directory")           // ENOTDIR: a dataset where a group must be
	ErrIsDir    = errors.New("is a directory")            // EISDIR: a group where a dataset must be
	ErrBusy     = errors.New("device or resource busy")   // EBUSY: the root, or a changed stage's base
	ErrStale    = errors.New("stale file handle")         // ESTALE: the stage or dataset is gone
	ErrNoAttr   = errors.New("no data available")         // ENODATA: no such attribute
)
