package probe

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// DMABufExport is what one export of device memory as a dma-buf gave
// (cuMemGetHandleForAddressRange with CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD).
type DMABufExport struct {
	// Elapsed is the export call alone: not the fdinfo read, not the
	// close.
	Elapsed time.Duration
	// FDInfo is /proc/self/fdinfo/<fd> as read while the descriptor
	// was open.
	FDInfo string
}

// DMABufFDInfo is what the kernel prints of a dma-buf descriptor in
// /proc/PID/fdinfo/FD: the lines every file has (fs/proc/fd.c seq_show:
// pos, flags in octal, mnt_id, ino), then the dma-buf's own
// (drivers/dma-buf/dma-buf.c dma_buf_show_fdinfo: size, count, exp_name,
// and name once a DMA_BUF_SET_NAME gave one). Kernels differ in what they
// add (Android's dmabuf_inode_no, a generic size line in some versions);
// lines the parser does not name are kept in Other.
type DMABufFDInfo struct {
	Pos int64 `json:"pos"`
	// Flags is the file's f_flags as printed: octal with a leading 0
	// (02000002 is O_CLOEXEC | O_RDWR).
	Flags string `json:"flags"`
	MntID int64  `json:"mnt_id"`
	Ino   uint64 `json:"ino"`
	// Size is the dma-buf's size in bytes.
	Size uint64 `json:"size"`
	// Count is file_count less the reference procfs takes to print it:
	// the descriptors and kernel references to the buffer's file.
	Count int64 `json:"count"`
	// ExpName is the exporter's name ("nv_dmabuf" for nvidia.ko's
	// exports: seen on the lent H100, driver 580.159.04).
	ExpName string `json:"exp_name"`
	// Name is the buffer's name, if one was set.
	Name  string            `json:"name,omitempty"`
	Other map[string]string `json:"other,omitempty"`
}

// ParseDMABufFDInfo parses the text of /proc/PID/fdinfo/FD of a dma-buf.
// Each line is "key:\tvalue" (the kernel's seq_printf formats). Text
// without exp_name is not a dma-buf's and is an error; so is a number
// that does not parse.
func ParseDMABufFDInfo(text string) (*DMABufFDInfo, error) {
	info := &DMABufFDInfo{}
	seen := false
	for line := range strings.SplitSeq(text, "\n") {
		if strings.TrimSpace(line) == "" {
			continue
		}
		k, v, ok := strings.Cut(line, ":")
		if !ok {
			return nil, fmt.Errorf("fdinfo: line %q has no key", line)
		}
		k, v = strings.TrimSpace(k), strings.TrimSpace(v)
		var err error
		switch k {
		case "pos":
			info.Pos, err = strconv.ParseInt(v, 10, 64)
		case "flags":
			_, err = strconv.ParseUint(v, 8, 64)
			info.Flags = v
		case "mnt_id":
			info.MntID, err = strconv.ParseInt(v, 10, 64)
		case "ino":
			info.Ino, err = strconv.ParseUint(v, 10, 64)
		case "size":
			info.Size, err = strconv.ParseUint(v, 10, 64)
		case "count":
			info.Count, err = strconv.ParseInt(v, 10, 64)
		case "exp_name":
			info.ExpName, seen = v, true
		case "name":
			info.Name = v
		default:
			if info.Other == nil {
				info.Other = map[string]string{}
			}
			info.Other[k] = v
		}
		if err != nil {
			return nil, fmt.Errorf("fdinfo: %s: %w", k, err)
		}
	}
	if !seen {
		return nil, fmt.Errorf("fdinfo: no exp_name line: not a dma-buf")
	}
	return info, nil
}
