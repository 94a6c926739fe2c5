package h5

// #include "vh5.h"
import "C"

import (
	"fmt"
	"strings"
)

// Type describes a dataset's or attribute's element type.
type Type struct {
	// DType is the numpy dtype string with the file's byte order ("<f8", ">i4", "|b1",
	// "|S8", "<c16", "|V16"), or "O" for variable-length strings.
	DType string
	// Size is the element size in bytes in the file (for vlen strings: HDF5's handle size).
	Size int
	// VlenString is set for variable-length strings; UTF8 for their (or fixed strings') charset.
	VlenString bool
	UTF8       bool
	// Raw is false for types whose elements have no byte form of their own (vlen sequences,
	// references): they cannot be served as raw bytes.
	Raw bool
}

func describe(ti *C.vh5_type_info) Type {
	size := int(ti.size)
	order := func(o C.int) string {
		if size == 1 {
			return "|"
		}
		if o == C.H5T_ORDER_BE {
			return ">"
		}
		return "<"
	}
	t := Type{Size: size, Raw: true, UTF8: ti.cset == C.H5T_CSET_UTF8}
	switch ti.cls {
	case C.H5T_INTEGER:
		kind := "i"
		if ti.sign == C.H5T_SGN_NONE {
			kind = "u"
		}
		t.DType = fmt.Sprintf("%s%s%d", order(ti.order), kind, size)
	case C.H5T_FLOAT:
		t.DType = fmt.Sprintf("%sf%d", order(ti.order), size)
	case C.H5T_BITFIELD:
		t.DType = fmt.Sprintf("%su%d", order(ti.order), size)
	case C.H5T_ENUM:
		if ti.is_bool != 0 {
			t.DType = "|b1"
		} else {
			kind := "i"
			if ti.sign == C.H5T_SGN_NONE {
				kind = "u"
			}
			t.DType = fmt.Sprintf("%s%s%d", order(ti.order), kind, size)
		}
	case C.H5T_STRING:
		if ti.is_vlen_str != 0 {
			t.DType, t.VlenString, t.Raw = "O", true, false
		} else {
			t.DType = fmt.Sprintf("|S%d", size)
		}
	case C.H5T_COMPOUND:
		if ti.is_complex != 0 {
			sz := size
			t.DType = fmt.Sprintf("%sc%d", orderOf(ti.complex_order, sz), sz)
		} else {
			t.DType = fmt.Sprintf("|V%d", size)
		}
	case C.H5T_OPAQUE:
		// h5py tags numpy datetime64/timedelta64 as "NUMPY:<M8[ns]".
		if tag := C.GoString(&ti.tag[0]); strings.HasPrefix(tag, "NUMPY:") {
			t.DType = strings.TrimPrefix(tag, "NUMPY:")
		} else {
			t.DType = fmt.Sprintf("|V%d", size)
		}
	case C.H5T_ARRAY:
		t.DType = fmt.Sprintf("|V%d", size)
	default: // vlen sequences, references, time
		t.DType = fmt.Sprintf("|V%d", size)
		t.Raw = false
	}
	return t
}

func orderOf(o C.int, size int) string {
	if size == 1 {
		return "|"
	}
	if o == C.H5T_ORDER_BE {
		return ">"
	}
	return "<"
}
