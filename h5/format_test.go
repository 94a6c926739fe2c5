package h5

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/vh5fs/vh5fs/h5meta"
)

func TestCheckEncodings(t *testing.T) {
	major, minor := libVersion()
	v := major*100 + minor // 110, 112, 114, 200
	tests := []struct {
		name  string
		e     h5meta.Encodings
		since int // the first release that reads e
		word  string
	}{
		{"what 1.10 writes by default", h5meta.Encodings{Datatype: 1, Layout: 3, MappingList: 0, Selection: 1}, 110, ""},
		{"1.10 with libver latest", h5meta.Encodings{Datatype: 3, Layout: 4, MappingList: 0, Selection: 2}, 110, ""},
		{"not virtual", h5meta.Encodings{Datatype: 3, Layout: 4, MappingList: -1}, 110, ""},
		{"datatype message v4", h5meta.Encodings{Datatype: 4, Layout: 4, MappingList: -1}, 112, "datatype message version 4"},
		{"hyperslab v3", h5meta.Encodings{Datatype: 3, Layout: 4, Selection: 3}, 112, "hyperslab selection version 3"},
		{"1.14 with libver latest", h5meta.Encodings{Datatype: 4, Layout: 4, Selection: 3}, 112, "datatype message version 4"},
		{"mapping list v1", h5meta.Encodings{Datatype: 4, Layout: 4, MappingList: 1, Selection: 3}, 200, "mapping list encoding version 1"},
		{"layout v6", h5meta.Encodings{Datatype: 3, Layout: 6}, 10000, "data layout message version 6"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := CheckEncodings(tt.e)
			if v >= tt.since {
				assert.NoError(t, err)
				return
			}
			require.ErrorIs(t, err, ErrNewerFormat)
			assert.Contains(t, err.Error(), tt.word)
			assert.Contains(t, err.Error(), "built with HDF5 "+HeaderVersion())
			assert.Contains(t, err.Error(), "rebuild vh5fs against HDF5 >= ")
		})
	}
}

func TestNewerFormatFromStack(t *testing.T) {
	tests := []struct {
		stack, feature string
	}{
		{"H5Dopen2: unable to open dataset; H5O__dtype_decode_helper: bad version number for datatype message", "a datatype encoding"},
		{"H5D__virtual_copy_layout: unable to copy; H5S__hyper_deserialize: bad version number for hyperslab selection", "a hyperslab selection encoding"},
		{"H5F_open: unable to read superblock", ""},
		{"", ""},
	}
	for _, tt := range tests {
		fe := newerFormat(tt.stack)
		if tt.feature == "" {
			assert.Nil(t, fe, tt.stack)
			continue
		}
		require.NotNil(t, fe, tt.stack)
		assert.Contains(t, fe.Feature, tt.feature)
		// An *Error carrying it reads as the refusal, and is ErrNewerFormat.
		e := &Error{Op: "open dataset", Stack: tt.stack, Err: fe}
		assert.ErrorIs(t, e, ErrNewerFormat)
		assert.Equal(t, fe.Error(), e.Error())
	}
}
