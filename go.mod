module github.com/vh5fs/vh5fs

go 1.24

require (
	github.com/hanwen/go-fuse/v2 v2.12.1
	github.com/pkg/xattr v0.4.12
	github.com/stretchr/testify v1.12.1
	golang.org/x/sys v0.28.0
	gonum.org/v1/hdf5 v0.0.0-20210714002203-8c5d23bc6946
)

require go.yaml.in/yaml/v3 v3.0.5 // indirect
