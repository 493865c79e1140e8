import re,sys,collections
tot=collections.Counter(); nets=set(); per=collections.defaultdict(int); cause=collections.Counter(); planned=0
for path,need in [('run-A.txt',24),('run-B.txt',12),('run-C.txt',12)]:
    lines=[l for l in open(path) if l.startswith('random:')]
    cnt=collections.Counter(l.split()[0] for l in lines)
    whole={n for n,c in cnt.items() if c==need}
    for l in lines:
        f=l.split()
        if f[0] not in whole: continue
        st=f[10] if len(f)>10 else '?'
        tot[st]+=1
        if st=='oom': cause[f[11].rstrip(':')]+=1
        m=re.search(r'planned (\d+)',l)
        if m and int(m.group(1))>0: planned+=1
    nets|=whole
    print(path, 'whole nets', len(whole), 'runs', sum(cnt[n] for n in whole))
print('nets', len(nets), dict(tot), 'oom causes', dict(cause), 'runs with planned iterations', planned)
