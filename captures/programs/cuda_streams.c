/*
 * cuda_streams.c: a small CUDA driver-API workload for the committed captures
 * (captures/README.md) and the overhead benchmark (bench/record_overhead.py).
 *
 * Context (the primary one), a PTX module with one kernel, NSTREAMS
 * non-blocking streams, each with a 16 MiB device buffer and a pinned host
 * buffer: copy in, add one to every element, copy out; then checks the
 * result and frees everything.  Plain cuMemAlloc allocations only.
 *
 * libcuda is opened with dlopen, so this builds with plain gcc and no CUDA
 * headers:  gcc -O2 -o cuda_streams cuda_streams.c -ldl
 * It prints "cuda_streams ok elapsed_ms <ms from main's start to its end>".
 */
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define NSTREAMS 4
#define COUNT (4u << 20) /* floats per stream: 16 MiB */

typedef int CUresult;
typedef int CUdevice;
typedef void *CUcontext, *CUmodule, *CUfunction, *CUstream;
typedef unsigned long long CUdeviceptr;

static const char PTX[] =
	".version 7.0\n"
	".target sm_52\n"
	".address_size 64\n"
	".visible .entry add_one(.param .u64 p, .param .u32 n)\n"
	"{\n"
	"  .reg .pred %p<2>;\n"
	"  .reg .b32 %r<6>;\n"
	"  .reg .b64 %rd<5>;\n"
	"  .reg .f32 %f<3>;\n"
	"  ld.param.u64 %rd1, [p];\n"
	"  ld.param.u32 %r2, [n];\n"
	"  mov.u32 %r3, %ctaid.x;\n"
	"  mov.u32 %r4, %ntid.x;\n"
	"  mov.u32 %r5, %tid.x;\n"
	"  mad.lo.s32 %r1, %r3, %r4, %r5;\n"
	"  setp.ge.u32 %p1, %r1, %r2;\n"
	"  @%p1 bra DONE;\n"
	"  cvta.to.global.u64 %rd2, %rd1;\n"
	"  mul.wide.u32 %rd3, %r1, 4;\n"
	"  add.s64 %rd4, %rd2, %rd3;\n"
	"  ld.global.f32 %f1, [%rd4];\n"
	"  add.f32 %f2, %f1, 0f3F800000;\n"
	"  st.global.f32 [%rd4], %f2;\n"
	"DONE:\n"
	"  ret;\n"
	"}\n";

static struct {
	CUresult (*Init)(unsigned);
	CUresult (*DeviceGet)(CUdevice *, int);
	CUresult (*DevicePrimaryCtxRetain)(CUcontext *, CUdevice);
	CUresult (*DevicePrimaryCtxRelease)(CUdevice);
	CUresult (*CtxSetCurrent)(CUcontext);
	CUresult (*ModuleLoadData)(CUmodule *, const void *);
	CUresult (*ModuleGetFunction)(CUfunction *, CUmodule, const char *);
	CUresult (*ModuleUnload)(CUmodule);
	CUresult (*StreamCreate)(CUstream *, unsigned);
	CUresult (*StreamDestroy)(CUstream);
	CUresult (*StreamSynchronize)(CUstream);
	CUresult (*MemAlloc)(CUdeviceptr *, size_t);
	CUresult (*MemFree)(CUdeviceptr);
	CUresult (*MemAllocHost)(void **, size_t);
	CUresult (*MemFreeHost)(void *);
	CUresult (*MemcpyHtoDAsync)(CUdeviceptr, const void *, size_t, CUstream);
	CUresult (*MemcpyDtoHAsync)(void *, CUdeviceptr, size_t, CUstream);
	CUresult (*LaunchKernel)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
				 CUstream, void **, void **);
	CUresult (*GetErrorString)(CUresult, const char **);
} cu;

static const struct { const char *name; size_t offset; } SYMBOLS[] = {
#define SYM(field, name) { name, __builtin_offsetof(__typeof__(cu), field) }
	SYM(Init, "cuInit"), SYM(DeviceGet, "cuDeviceGet"), SYM(DevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain"),
	SYM(DevicePrimaryCtxRelease, "cuDevicePrimaryCtxRelease_v2"), SYM(CtxSetCurrent, "cuCtxSetCurrent"),
	SYM(ModuleLoadData, "cuModuleLoadData"), SYM(ModuleGetFunction, "cuModuleGetFunction"),
	SYM(ModuleUnload, "cuModuleUnload"), SYM(StreamCreate, "cuStreamCreate"), SYM(StreamDestroy, "cuStreamDestroy_v2"),
	SYM(StreamSynchronize, "cuStreamSynchronize"), SYM(MemAlloc, "cuMemAlloc_v2"), SYM(MemFree, "cuMemFree_v2"),
	SYM(MemAllocHost, "cuMemAllocHost_v2"), SYM(MemFreeHost, "cuMemFreeHost"),
	SYM(MemcpyHtoDAsync, "cuMemcpyHtoDAsync_v2"), SYM(MemcpyDtoHAsync, "cuMemcpyDtoHAsync_v2"),
	SYM(LaunchKernel, "cuLaunchKernel"), SYM(GetErrorString, "cuGetErrorString"),
#undef SYM
};

static void check(CUresult r, const char *what)
{
	const char *text = "?";
	if (r == 0)
		return;
	if (cu.GetErrorString)
		cu.GetErrorString(r, &text);
	fprintf(stderr, "cuda_streams: %s failed: %d %s\n", what, r, text);
	exit(1);
}

static double now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

int main(void)
{
	double start = now_ms();
	void *lib = dlopen("libcuda.so.1", RTLD_NOW);
	CUdevice dev;
	CUcontext ctx;
	CUmodule mod;
	CUfunction fn;
	CUstream streams[NSTREAMS];
	CUdeviceptr dbuf[NSTREAMS];
	float *hbuf[NSTREAMS];
	unsigned count = COUNT;

	if (!lib) {
		fprintf(stderr, "cuda_streams: %s\n", dlerror());
		return 1;
	}
	for (size_t i = 0; i < sizeof(SYMBOLS) / sizeof(SYMBOLS[0]); i++) {
		void *f = dlsym(lib, SYMBOLS[i].name);
		if (!f) {
			fprintf(stderr, "cuda_streams: no %s in libcuda\n", SYMBOLS[i].name);
			return 1;
		}
		*(void **)((char *)&cu + SYMBOLS[i].offset) = f;
	}
	check(cu.Init(0), "cuInit");
	check(cu.DeviceGet(&dev, 0), "cuDeviceGet");
	check(cu.DevicePrimaryCtxRetain(&ctx, dev), "cuDevicePrimaryCtxRetain");
	check(cu.CtxSetCurrent(ctx), "cuCtxSetCurrent");
	check(cu.ModuleLoadData(&mod, PTX), "cuModuleLoadData");
	check(cu.ModuleGetFunction(&fn, mod, "add_one"), "cuModuleGetFunction");
	for (int s = 0; s < NSTREAMS; s++) {
		check(cu.StreamCreate(&streams[s], 1 /* CU_STREAM_NON_BLOCKING */), "cuStreamCreate");
		check(cu.MemAlloc(&dbuf[s], COUNT * sizeof(float)), "cuMemAlloc");
		check(cu.MemAllocHost((void **)&hbuf[s], COUNT * sizeof(float)), "cuMemAllocHost");
		for (unsigned i = 0; i < COUNT; i++)
			hbuf[s][i] = (float)(s + i % 1000);
	}
	for (int s = 0; s < NSTREAMS; s++) {
		void *args[] = { &dbuf[s], &count };
		check(cu.MemcpyHtoDAsync(dbuf[s], hbuf[s], COUNT * sizeof(float), streams[s]), "cuMemcpyHtoDAsync");
		check(cu.LaunchKernel(fn, (COUNT + 255) / 256, 1, 1, 256, 1, 1, 0, streams[s], args, NULL), "cuLaunchKernel");
		check(cu.MemcpyDtoHAsync(hbuf[s], dbuf[s], COUNT * sizeof(float), streams[s]), "cuMemcpyDtoHAsync");
	}
	for (int s = 0; s < NSTREAMS; s++) {
		check(cu.StreamSynchronize(streams[s]), "cuStreamSynchronize");
		for (unsigned i = 0; i < COUNT; i += 4099)
			if (hbuf[s][i] != (float)(s + i % 1000) + 1.0f) {
				fprintf(stderr, "cuda_streams: stream %d element %u is %f\n", s, i, hbuf[s][i]);
				return 1;
			}
	}
	for (int s = 0; s < NSTREAMS; s++) {
		check(cu.MemFreeHost(hbuf[s]), "cuMemFreeHost");
		check(cu.MemFree(dbuf[s]), "cuMemFree");
		check(cu.StreamDestroy(streams[s]), "cuStreamDestroy");
	}
	check(cu.ModuleUnload(mod), "cuModuleUnload");
	check(cu.DevicePrimaryCtxRelease(dev), "cuDevicePrimaryCtxRelease");
	printf("cuda_streams ok elapsed_ms %.3f\n", now_ms() - start);
	return 0;
}
