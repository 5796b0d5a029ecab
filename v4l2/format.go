package v4l2

import (
	"fmt"
)

// PixFmt is a V4L2 pixel format, a fourcc (v4l2_fourcc).
type PixFmt uint32

func fourcc(a, b, c, d byte) PixFmt {
	return PixFmt(a) | PixFmt(b)<<8 | PixFmt(c)<<16 | PixFmt(d)<<24
}

// The pixel formats of include/uapi/linux/videodev2.h the model knows:
// RGGB Bayer raw at 10 and 12 bits, in 16-bit little-endian containers
// or MIPI-packed (10 bits: four pixels in five bytes, the low bits of
// all four in the fifth; 12 bits: two pixels in three bytes), and NV12
// (a Y plane, then interleaved Cb/Cr at half resolution both ways).
var (
	PixFmtSRGGB10  = fourcc('R', 'G', '1', '0')
	PixFmtSRGGB12  = fourcc('R', 'G', '1', '2')
	PixFmtSRGGB10P = fourcc('p', 'R', 'A', 'A')
	PixFmtSRGGB12P = fourcc('p', 'R', 'C', 'C')
	PixFmtNV12     = fourcc('N', 'V', '1', '2')
)

func (f PixFmt) String() string {
	return string([]byte{byte(f), byte(f >> 8), byte(f >> 16), byte(f >> 24)})
}

// fmtInfo is what v4l2_format_info (drivers/media/v4l2-core/v4l2-common.c)
// says of a format: bits per sample, the horizontal block a line is
// made of (packed formats), and whether it is a raw Bayer format.
type fmtInfo struct {
	bits    int // sample depth
	bpp     int // bytes per block (one block of blockW pixels)
	blockW  int
	raw     bool
	chromaH int // NV12: the chroma plane has lines/2
}

var formats = map[PixFmt]fmtInfo{
	PixFmtSRGGB10:  {bits: 10, bpp: 2, blockW: 1, raw: true},
	PixFmtSRGGB12:  {bits: 12, bpp: 2, blockW: 1, raw: true},
	PixFmtSRGGB10P: {bits: 10, bpp: 5, blockW: 4, raw: true},
	PixFmtSRGGB12P: {bits: 12, bpp: 3, blockW: 2, raw: true},
	PixFmtNV12:     {bits: 8, bpp: 1, blockW: 1, chromaH: 2},
}

// Format is struct v4l2_pix_format (single-planar): the frame's
// geometry and the sizes the driver computes.
type Format struct {
	Width, Height uint32
	PixelFormat   PixFmt
	// BytesPerLine is the stride of a line (of the Y plane for NV12);
	// SizeImage the bytes a buffer must hold.
	BytesPerLine uint32
	SizeImage    uint32
}

func (f Format) String() string {
	return fmt.Sprintf("%dx%d %v (bytesperline %d, sizeimage %d)", f.Width, f.Height, f.PixelFormat, f.BytesPerLine, f.SizeImage)
}

// Pixels is the number of pixels of a frame.
func (f Format) Pixels() uint64 { return uint64(f.Width) * uint64(f.Height) }

// Raw says whether the format is Bayer raw.
func (f Format) Raw() bool { return formats[f.PixelFormat].raw }

// Limits are what a driver's hardware accepts, used by Adjust: the size
// range and the alignment of a line's stride (Tegra VI writes lines at
// 64-byte multiples; a PCIe card may need none).
type Limits struct {
	MinWidth, MinHeight, MaxWidth, MaxHeight uint32
	// StrideAlign is the alignment of BytesPerLine in bytes; 0 is 1.
	StrideAlign uint32
}

// Adjust is what VIDIOC_S_FMT and VIDIOC_TRY_FMT do with a requested
// format: never EINVAL for a format the driver lacks, but the nearest it
// has (the first of formats when the fourcc is unknown: V4L2 drivers
// replace it), the size clamped to the limits and rounded down to the
// format's blocks (Bayer and NV12: even width and height; packed 10-bit:
// width a multiple of 4), then bytesperline and sizeimage computed as
// v4l2_fill_pixfmt does: bytesperline is at least the line's bytes,
// rounded up to the stride alignment (a larger one the application
// asked for is kept), and sizeimage bytesperline × height, times 3/2
// for NV12.
func Adjust(want Format, allowed []PixFmt, lim Limits) Format {
	f := want
	ok := false
	for _, a := range allowed {
		ok = ok || a == f.PixelFormat
	}
	if !ok {
		f.PixelFormat = allowed[0]
	}
	info := formats[f.PixelFormat]
	f.Width = clamp(f.Width, lim.MinWidth, lim.MaxWidth)
	f.Height = clamp(f.Height, lim.MinHeight, lim.MaxHeight)
	wAlign := uint32(max(2, info.blockW))
	f.Width = max(f.Width/wAlign*wAlign, wAlign)
	f.Height = max(f.Height/2*2, 2)
	line := f.Width / uint32(info.blockW) * uint32(info.bpp)
	align := max(lim.StrideAlign, 1)
	line = (line + align - 1) / align * align
	if want.BytesPerLine > line && want.PixelFormat == f.PixelFormat {
		line = (want.BytesPerLine + align - 1) / align * align
	}
	f.BytesPerLine = line
	f.SizeImage = line * f.Height
	if info.chromaH != 0 {
		f.SizeImage += line * f.Height / uint32(info.chromaH)
	}
	return f
}

func clamp(v, lo, hi uint32) uint32 {
	if hi != 0 && v > hi {
		v = hi
	}
	return max(v, lo)
}

// Sample is the raw value of pixel (x, y) of frame seq: the synthetic
// sensor pattern, a deterministic function of the three so that a
// consumer can check what it received (a diagonal gradient that moves by
// one pixel a frame, in the format's bit depth).
func Sample(bits int, seq uint32, x, y uint32) uint16 {
	v := (x + 2*y + 3*seq) * 7
	return uint16(v & (1<<bits - 1))
}

// Pattern is the bytes of frame seq in format f, as the sensor sends
// them and the capture device writes them (stride padding zero).
func Pattern(f Format, seq uint32) []byte {
	info := formats[f.PixelFormat]
	out := make([]byte, f.SizeImage)
	if !info.raw {
		// A capture device in a YUV format: Y is the pattern's top 8
		// bits, chroma the constant 128.
		for y := range f.Height {
			for x := range f.Width {
				out[y*f.BytesPerLine+x] = byte(Sample(8, seq, x, y))
			}
		}
		for i := f.BytesPerLine * f.Height; i < f.SizeImage; i++ {
			out[i] = 128
		}
		return out
	}
	for y := range f.Height {
		line := out[y*f.BytesPerLine:]
		for x := range f.Width {
			putRaw(line, info, x, Sample(info.bits, seq, x, y))
		}
	}
	return out
}

// putRaw stores sample v of pixel x into a line of a raw format.
func putRaw(line []byte, info fmtInfo, x uint32, v uint16) {
	switch {
	case info.bpp == 2: // 16-bit container, little-endian
		line[2*x], line[2*x+1] = byte(v), byte(v>>8)
	case info.bits == 10: // four pixels: 8 high bits each, then the 2 low bits of each
		b := x / 4 * 5
		line[b+x%4] = byte(v >> 2)
		line[b+4] |= byte(v&3) << (2 * (x % 4))
	default: // 12 bits: two pixels: 8 high bits each, then the low nibbles
		b := x / 2 * 3
		line[b+x%2] = byte(v >> 4)
		line[b+2] |= byte(v&15) << (4 * (x % 2))
	}
}

// getRaw reads the sample of pixel x of a raw line.
func getRaw(line []byte, info fmtInfo, x uint32) uint16 {
	switch {
	case info.bpp == 2:
		return uint16(line[2*x]) | uint16(line[2*x+1])<<8
	case info.bits == 10:
		b := x / 4 * 5
		return uint16(line[b+x%4])<<2 | uint16(line[b+4]>>(2*(x%4)))&3
	default:
		b := x / 2 * 3
		return uint16(line[b+x%2])<<4 | uint16(line[b+2]>>(4*(x%2)))&15
	}
}

// Process is the model ISP's image function, RAW (format in) to NV12
// (format out, the same size): Y of each pixel is its raw sample's top
// 8 bits; each 2×2 RGGB block gives Cr from its red sample and Cb from
// its blue one. Not a real demosaic, but a deterministic function of
// the input that a consumer can recompute to verify what it got.
func Process(in Format, raw []byte, out Format) ([]byte, error) {
	info, ok := formats[in.PixelFormat]
	if !ok || !info.raw || out.PixelFormat != PixFmtNV12 || in.Width != out.Width || in.Height != out.Height {
		return nil, fmt.Errorf("v4l2: ISP: %v to %v: want RAW to NV12 of one size", in, out)
	}
	if uint32(len(raw)) < in.SizeImage {
		return nil, fmt.Errorf("v4l2: ISP: %d bytes of input, want %d", len(raw), in.SizeImage)
	}
	nv := make([]byte, out.SizeImage)
	shift := info.bits - 8
	v8 := func(x, y uint32) byte { return byte(getRaw(raw[y*in.BytesPerLine:], info, x) >> shift) }
	for y := range in.Height {
		for x := range in.Width {
			nv[y*out.BytesPerLine+x] = v8(x, y)
		}
	}
	uv := nv[out.BytesPerLine*out.Height:]
	for y := uint32(0); y < in.Height; y += 2 {
		row := uv[y/2*out.BytesPerLine:]
		for x := uint32(0); x < in.Width; x += 2 {
			row[x] = v8(x+1, y+1) // Cb: the blue sample of RGGB
			row[x+1] = v8(x, y)   // Cr: the red one
		}
	}
	return nv, nil
}
