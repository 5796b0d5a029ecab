package drm

import "fmt"

// Format is a DRM fourcc pixel format (include/uapi/drm/drm_fourcc.h).
type Format uint32

func fourcc(a, b, c, d byte) Format {
	return Format(uint32(a) | uint32(b)<<8 | uint32(c)<<16 | uint32(d)<<24)
}

// The formats the primary plane scans out.
var (
	// FormatXRGB8888 is DRM_FORMAT_XRGB8888: one plane of 32-bit
	// pixels, the ubiquitous scanout format.
	FormatXRGB8888 = fourcc('X', 'R', '2', '4')
	// FormatNV12 is DRM_FORMAT_NV12: a plane of 8-bit luma and a plane
	// of interleaved 8-bit Cb/Cr at half the width and half the height,
	// what ISPs and video decoders write (12 bits a pixel).
	FormatNV12 = fourcc('N', 'V', '1', '2')
)

// formatInfo is struct drm_format_info: the planes, the bytes a pixel
// of each, and the chroma subsampling (drivers/gpu/drm/drm_fourcc.c).
type formatInfo struct {
	planes     int
	cpp        [4]int
	hsub, vsub int
}

func (f Format) info() (formatInfo, bool) {
	switch f {
	case FormatXRGB8888:
		return formatInfo{planes: 1, cpp: [4]int{4}, hsub: 1, vsub: 1}, true
	case FormatNV12:
		return formatInfo{planes: 2, cpp: [4]int{1, 2}, hsub: 2, vsub: 2}, true
	}
	return formatInfo{}, false
}

// planeSize is drm_format_info_plane_width/height.
func (fi formatInfo) planeSize(i, w, h int) (int, int) {
	if i == 0 {
		return w, h
	}
	return w / fi.hsub, h / fi.vsub
}

// String is the fourcc's four letters ("XR24", "NV12").
func (f Format) String() string {
	b := []byte{byte(f), byte(f >> 8), byte(f >> 16), byte(f >> 24)}
	for _, c := range b {
		if c < ' ' || c > '~' {
			return fmt.Sprintf("0x%08x", uint32(f))
		}
	}
	return string(b)
}

// FrameBytes is what the scanout of one width × height frame in format
// f reads: every plane's visible pixels (4 bytes a pixel for XRGB8888,
// 1.5 for NV12). Zero for a format the plane does not take.
func FrameBytes(f Format, width, height int) int64 {
	fi, ok := f.info()
	if !ok {
		return 0
	}
	var n int64
	for i := 0; i < fi.planes; i++ {
		w, h := fi.planeSize(i, width, height)
		n += int64(w) * int64(h) * int64(fi.cpp[i])
	}
	return n
}
