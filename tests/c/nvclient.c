/*
 * nvclient.c: a client of the (fake, strict) NVIDIA driver that does what
 * libcuda does with everything a replay must remap, for the replay tests.
 * Device paths come from $RMTRACE_TEST_DEVICE_DIR; run it under
 * fakedrv.so with $FAKEDRV_STRICT.  It checks what the driver gave back and
 * exits non-zero with a message when something reached it wrong.
 *
 *   nvclient [unsafe] [leak]
 *
 * RM clients RM numbers itself; GPU, control and event fds passed inside
 * arguments and params (REGISTER_FD, ALLOC_OS_EVENT, an OS event's alloc
 * params, MAP_MEMORY, UVM's rmCtrlFd and uvmFd); a mapping cookie handed back
 * by MAP_MEMORY and passed to UPDATE_DEVICE_MAPPING_INFO and UNMAP_MEMORY; the
 * board's UUID from GET_GID_INFO passed to UVM; a nested pointer
 * (GET_CLASSLIST); VA reserved with an anonymous mmap and handed to UVM;
 * OS-descriptor memory; a dup; a second thread with controls of its own.
 * "unsafe" adds a PERF_BOOST and a MIG configuration session (presenting a
 * MIG capability fd) with a control and a free on it (the replay must skip
 * all four); "leak" leaves the first
 * RM client alive at exit (the replay's teardown must free it).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <unistd.h>

#define ESC(nr, size) _IOC(_IOC_READ | _IOC_WRITE, 'F', (nr), (size))
#define RM_ALLOC_MEMORY 0x27
#define RM_FREE 0x29
#define RM_CONTROL 0x2a
#define RM_ALLOC 0x2b
#define RM_MAP_MEMORY 0x4e
#define RM_UNMAP_MEMORY 0x4f
#define RM_UPDATE_DEVICE_MAPPING_INFO 0x5e
#define CARD_INFO 200
#define REGISTER_FD 201
#define ALLOC_OS_EVENT 206
#define FREE_OS_EVENT 207
#define UVM_INITIALIZE 0x30000001ul
#define UVM_MM_INITIALIZE 75ul
#define UVM_REGISTER_GPU 37ul
#define UVM_UNREGISTER_GPU 38ul
#define UVM_REGISTER_GPU_VASPACE 25ul
#define UVM_CREATE_EXTERNAL_RANGE 73ul
#define UVM_MAP_EXTERNAL_ALLOCATION 33ul
#define UVM_FREE 34ul
#define CTRL_GET_CLASSLIST 0x00800201u
#define CTRL_GPU_GET_INFO_V2 0x20800102u
#define CTRL_GET_GID_INFO 0x2080014au
#define CTRL_PERF_BOOST 0x2080200au
#define CTRL_SMC_QUERY 0xc6390101u
#define VA_BASE 0x200000000ull
#define VA_SIZE 0x200000ull

struct nvos54 { uint32_t hClient, hObject, cmd, flags; uint64_t params; uint32_t paramsSize, status; };
struct nvos64 { uint32_t hRoot, hParent, hNew, hClass; uint64_t pAllocParms, pRights; uint32_t paramsSize, flags, status, pad; };
struct nvos00 { uint32_t hRoot, hParent, hOld, status; };
struct nvos02fd { uint32_t hRoot, hParent, hNew, hClass, flags, pad; uint64_t pMemory, limit; uint32_t status, pad2; int32_t fd, pad3; };
struct nvos33fd { uint32_t hClient, hDevice, hMemory, pad; uint64_t offset, length, pLinearAddress; uint32_t status, flags; int32_t fd, pad2; };
struct nvos34 { uint32_t hClient, hDevice, hMemory, pad; uint64_t pLinearAddress; uint32_t status, flags; };
struct nvos56 { uint32_t hClient, hDevice, hMemory, pad; uint64_t pOld, pNew; uint32_t status, pad2; };
struct os_event { uint32_t hClient, hDevice, fd, status; };
struct nv0005 { uint32_t hParentClient, hSrcResource, hClass, notifyIndex; uint64_t data; };
struct classlist { uint32_t numClasses, pad; uint64_t classList; };
struct gid { uint32_t index, flags, length; uint8_t data[256]; };

static const char *dir;
static uint32_t client;

static void fail(const char *what)
{
	fprintf(stderr, "nvclient: %s (errno %d)\n", what, errno);
	exit(99);
}

static void check(int ok, const char *what)
{
	if (!ok)
		fail(what);
}

static int dev(const char *name)
{
	char path[4096];
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	int fd = open(path, O_RDWR | O_CLOEXEC);
	check(fd >= 0, path);
	return fd;
}

static uint32_t control(int fd, uint32_t hobject, uint32_t cmd, void *params, uint32_t size)
{
	struct nvos54 c = { client, hobject, cmd, 0, (uint64_t)(uintptr_t)params, size, 0xffffffffu };
	check(ioctl(fd, ESC(RM_CONTROL, sizeof(c)), &c) == 0, "RM_CONTROL");
	return c.status;
}

static uint32_t alloc(int fd, uint32_t root, uint32_t parent, uint32_t *handle, uint32_t cls, void *params)
{
	struct nvos64 a = { root, parent, *handle, cls, (uint64_t)(uintptr_t)params, 0, 0, 0, 0xffffffffu, 0 };
	check(ioctl(fd, ESC(RM_ALLOC, sizeof(a)), &a) == 0, "RM_ALLOC");
	*handle = a.hNew;
	return a.status;
}

static uint32_t rm_free(int fd, uint32_t parent, uint32_t handle)
{
	struct nvos00 f = { client, parent, handle, 0xffffffffu };
	check(ioctl(fd, ESC(RM_FREE, sizeof(f)), &f) == 0, "RM_FREE");
	return f.status;
}

static uint32_t uvm(int fd, unsigned long req, void *params, uint32_t status_at)
{
	check(ioctl(fd, req, params) == 0, "UVM ioctl");
	return *(uint32_t *)((uint8_t *)params + status_at);
}

struct worker { int fd; uint32_t subdevice; };

static void *work(void *arg)
{
	struct worker *w = arg;
	uint8_t info[64];
	for (int i = 0; i < 3; i++) {
		memset(info, i, sizeof(info));
		check(control(w->fd, w->subdevice, CTRL_GPU_GET_INFO_V2, info, sizeof(info)) == 0 && info[0] == i + 1,
		      "thread control");
	}
	return NULL;
}

int main(int argc, char **argv)
{
	int unsafe = 0, leak = 0;
	for (int i = 1; i < argc; i++) {
		unsafe |= !strcmp(argv[i], "unsafe");
		leak |= !strcmp(argv[i], "leak");
	}
	dir = getenv("RMTRACE_TEST_DEVICE_DIR");
	check(dir != NULL, "RMTRACE_TEST_DEVICE_DIR");

	/* an RM client RM numbers, then a second one on its own fd, closed without a free (RM frees it) */
	int ctl = dev("nvidiactl"), other = dev("nvidiactl");
	uint8_t card[2 * 72];
	check(ioctl(ctl, ESC(CARD_INFO, sizeof(card)), card) == 0 && card[0] == 1, "CARD_INFO");
	uint32_t root = 0, root2 = 0, device = 0x5c000001, subdevice = 0x5c000002;
	uint32_t handle = 0;
	check(alloc(ctl, 0, 0, &root, 0x41, &handle) == 0 && root != 0, "root client");
	client = root;
	check(alloc(other, 0, 0, &root2, 0x41, &handle) == 0 && root2 != 0 && root2 != root, "second root client");
	close(other);
	uint8_t device_params[56] = { 0 }, subdevice_params[4] = { 0 };
	check(alloc(ctl, root, root, &device, 0x80, device_params) == 0, "device");
	check(alloc(ctl, root, device, &subdevice, 0x2080, subdevice_params) == 0, "subdevice");

	/* the board's UUID, as libcuda asks for it */
	struct gid gid = { 0, 2, 0, { 0 } };
	check(control(ctl, subdevice, CTRL_GET_GID_INFO, &gid, sizeof(gid)) == 0 && gid.length == 16, "GET_GID_INFO");

	/* a nested pointer: the count, then the list */
	uint32_t classes[5] = { 0 };
	struct classlist cl = { 0, 0, 0 };
	check(control(ctl, device, CTRL_GET_CLASSLIST, &cl, sizeof(cl)) == 0 && cl.numClasses == 5, "classlist count");
	cl.classList = (uint64_t)(uintptr_t)classes;
	check(control(ctl, device, CTRL_GET_CLASSLIST, &cl, sizeof(cl)) == 0 && classes[4] == 0xc004, "classlist");

	if (unsafe) {
		uint8_t boost[8] = { 0 }, query[8] = { 0 };
		uint64_t smc[2] = { (uint64_t)dev("nvidia-caps/nvidia-cap1"), 0 }; /* capDescriptor: the MIG capability's fd */
		uint32_t session = 0x5c000010;
		control(ctl, subdevice, CTRL_PERF_BOOST, boost, sizeof(boost));
		check(alloc(ctl, root, subdevice, &session, 0xc639, smc) == 0, "MIG config session");
		check(control(ctl, session, CTRL_SMC_QUERY, query, sizeof(query)) == 0, "control on the session");
		check(rm_free(ctl, subdevice, session) == 0, "free the session");
		close((int)smc[0]);
	}

	/* a GPU fd tied to the control fd; an OS event on another one, dup'd as libcuda does */
	int gpu = dev("nvidia0"), evfd = dev("nvidia0");
	int32_t register_ctl = ctl;
	check(ioctl(gpu, ESC(REGISTER_FD, sizeof(register_ctl)), &register_ctl) == 0, "REGISTER_FD");
	struct os_event ev = { root, subdevice, (uint32_t)evfd, 0xffffffffu };
	check(ioctl(ctl, ESC(ALLOC_OS_EVENT, sizeof(ev)), &ev) == 0 && ev.status == 0, "ALLOC_OS_EVENT");
	int evdup = dup(evfd);
	check(evdup >= 0, "dup");
	struct nv0005 evparams = { root, 0, 0x79, 0x30000001u, (uint64_t)evfd };
	uint32_t event = 0x5c000003;
	check(alloc(ctl, root, subdevice, &event, 0x79, &evparams) == 0, "OS event object");

	/* memory, mapped: a cookie handed back, then given back */
	uint32_t memory = 0x5c000004;
	uint8_t mem_params[128] = { 0 };
	check(alloc(ctl, root, device, &memory, 0x3e, mem_params) == 0, "memory");
	int mapfd = dev("nvidiactl");
	struct nvos33fd map = { root, device, memory, 0, 0, 4096, 0, 0xffffffffu, 0, mapfd, 0 };
	check(ioctl(ctl, ESC(RM_MAP_MEMORY, sizeof(map)), &map) == 0 && map.status == 0 && map.pLinearAddress, "MAP_MEMORY");
	void *cpu = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, mapfd, 0);
	check(cpu != MAP_FAILED, "mmap");
	struct nvos56 upd = { root, device, memory, 0, map.pLinearAddress, (uint64_t)(uintptr_t)cpu, 0xffffffffu, 0 };
	check(ioctl(ctl, ESC(RM_UPDATE_DEVICE_MAPPING_INFO, sizeof(upd)), &upd) == 0 && upd.status == 0,
	      "UPDATE_DEVICE_MAPPING_INFO");
	close(mapfd);

	/* controls from a second thread */
	pthread_t t;
	struct worker w = { ctl, subdevice };
	pthread_create(&t, NULL, work, &w);
	pthread_join(t, NULL);

	/* UVM: one fd initialized, another tied to it; the GPU by its UUID; a range over reserved VA */
	int uvmfd = dev("nvidia-uvm"), uvm2 = dev("nvidia-uvm");
	struct { uint64_t flags; uint32_t status, pad; } init = { 0, 0xffffffffu, 0 };
	check(uvm(uvmfd, UVM_INITIALIZE, &init, 8) == 0, "UVM_INITIALIZE");
	struct { int32_t uvmFd; uint32_t status; } mm = { uvmfd, 0xffffffffu };
	check(uvm(uvm2, UVM_MM_INITIALIZE, &mm, 4) == 0, "UVM_MM_INITIALIZE");
	struct { uint8_t uuid[16]; uint8_t numa, pad[3]; int32_t node, rmCtrlFd; uint32_t hClient, hSmc, status; } reg;
	memset(&reg, 0, sizeof(reg));
	memcpy(reg.uuid, gid.data, 16);
	reg.node = -1;
	reg.rmCtrlFd = -1;
	check(uvm(uvmfd, UVM_REGISTER_GPU, &reg, 36) == 0, "UVM_REGISTER_GPU");
	struct { uint8_t uuid[16]; int32_t rmCtrlFd; uint32_t hClient, hVaSpace, status; } vas;
	memcpy(vas.uuid, gid.data, 16);
	vas.rmCtrlFd = ctl;
	vas.hClient = root;
	vas.hVaSpace = device;
	vas.status = 0xffffffffu;
	check(uvm(uvmfd, UVM_REGISTER_GPU_VASPACE, &vas, 28) == 0, "UVM_REGISTER_GPU_VASPACE");
	void *va = mmap((void *)VA_BASE, VA_SIZE, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED_NOREPLACE, -1, 0);
	check(va == (void *)VA_BASE, "reserve VA");
	struct { uint64_t base, length; uint32_t status, pad; } range = { VA_BASE, VA_SIZE, 0xffffffffu, 0 };
	check(uvm(uvmfd, UVM_CREATE_EXTERNAL_RANGE, &range, 16) == 0, "UVM_CREATE_EXTERNAL_RANGE");
	static uint8_t ext[9264];
	memset(ext, 0, sizeof(ext));
	uint64_t base = VA_BASE, length = VA_SIZE, count = 1;
	memcpy(ext, &base, 8);
	memcpy(ext + 8, &length, 8);
	memcpy(ext + 24, gid.data, 16);
	memcpy(ext + 9240, &count, 8);
	int32_t rmfd = ctl;
	memcpy(ext + 9248, &rmfd, 4);
	memcpy(ext + 9252, &root, 4);
	memcpy(ext + 9256, &memory, 4);
	check(uvm(uvmfd, UVM_MAP_EXTERNAL_ALLOCATION, ext, 9260) == 0, "UVM_MAP_EXTERNAL_ALLOCATION");

	/* OS-descriptor memory: RM pins pages the process owns */
	uint8_t *pinned = mmap(NULL, 65536, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	check(pinned != MAP_FAILED, "pinned memory");
	struct nvos02fd desc = { root, device, 0x5c000005, 0x71, 0, 0, (uint64_t)(uintptr_t)pinned, 65535, 0xffffffffu, 0, -1, 0 };
	check(ioctl(gpu, ESC(RM_ALLOC_MEMORY, sizeof(desc)), &desc) == 0 && desc.status == 0, "ALLOC_MEMORY");

	/* teardown, as libcuda does it */
	struct { uint64_t base, length; uint32_t status, pad; } unmap = { VA_BASE, VA_SIZE, 0xffffffffu, 0 };
	check(uvm(uvmfd, UVM_FREE, &unmap, 16) == 0, "UVM_FREE");
	struct { uint8_t uuid[16]; uint32_t status; } unreg;
	memcpy(unreg.uuid, gid.data, 16);
	unreg.status = 0xffffffffu;
	check(uvm(uvmfd, UVM_UNREGISTER_GPU, &unreg, 16) == 0, "UVM_UNREGISTER_GPU");
	close(uvm2);
	close(uvmfd);
	struct nvos34 unm = { root, device, memory, 0, map.pLinearAddress, 0xffffffffu, 0 };
	check(ioctl(ctl, ESC(RM_UNMAP_MEMORY, sizeof(unm)), &unm) == 0 && unm.status == 0, "UNMAP_MEMORY");
	check(munmap(cpu, 4096) == 0, "munmap");
	check(rm_free(ctl, device, 0x5c000005) == 0, "free OS descriptor");
	check(rm_free(ctl, device, memory) == 0, "free memory");
	check(rm_free(ctl, subdevice, event) == 0, "free event");
	struct os_event fev = { root, subdevice, (uint32_t)evfd, 0xffffffffu };
	check(ioctl(ctl, ESC(FREE_OS_EVENT, sizeof(fev)), &fev) == 0 && fev.status == 0, "FREE_OS_EVENT");
	close(evdup);
	close(evfd);
	close(gpu);
	if (!leak) {
		check(rm_free(ctl, root, root) == 0, "free the client");
		close(ctl);
	}
	puts("nvclient ok");
	return 0;
}
