import json,subprocess,os,sys,re,collections
MiB=1<<20
files=sys.argv[1:]
cfgs={}
rows_by=collections.defaultdict(list)
for f in files:
    d=json.load(open(f))
    for r in d['rows']:
        if r.get('fraction') is None: continue
        k=(r['net'],r['style'],r['api'])
        rows_by[k].append((os.path.basename(f),r))
floor={}
for k in sorted(rows_by):
    if not any(r['verdict']=='oom' for _,r in rows_by[k]): continue
    net,style,api=k
    env=dict(os.environ, LD_LIBRARY_PATH='/work/main/build/tests/simgpu', SIMGPU_REPORT='/tmp/s23/fl.txt')
    subprocess.run(['/work/main/build/tests/minitrain/minitrain','--net',net,'--batch','16','--image','64','--iters','2','--alloc',style,'--conv-api',api,'--json'],env=env,stdout=subprocess.DEVNULL,stderr=subprocess.DEVNULL)
    m=re.search(r'largest_kernel_bytes: (\d+) (\S+)',open('/tmp/s23/fl.txt').read())
    floor[k]=(int(m.group(1)),m.group(2))
cnt=collections.Counter()
for k in sorted(floor):
    fb,fn=floor[k]
    for src,r in rows_by[k]:
        if r['verdict']!='oom': 
            if fb>r['limit']: print('!! not oom but floor over budget',k,r['verdict'])
            continue
        inf = fb>r['limit']
        cnt[(src,r['fraction'],r['style'],'infeasible' if inf else 'vmem')]+=1
    print(k, 'floor %.1f MiB %s'%(fb/MiB,fn), 'limits', sorted({(r['fraction'],r['limit']//MiB) for _,r in rows_by[k] if r['verdict']=='oom'}))
for c in sorted(cnt): print(c,cnt[c])
