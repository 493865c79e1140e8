import json,sys
def load(f):
    d=json.load(open(f)); return {(r['net'],r['style'],r['api'],r.get('threads'),r.get('fraction'),r.get('policy')):r for r in d['rows']}
a=load(sys.argv[1]); b=load(sys.argv[2])
tot={}
for k in sorted(set(a)|set(b), key=str):
    ra,rb=a.get(k),b.get(k)
    if not ra or not rb: print('MISSING',k, bool(ra), bool(rb)); continue
    if ra['verdict']!=rb['verdict']: print('VERDICT',k,ra['verdict'],'->',rb['verdict'], rb.get('detail',''))
    fa,fb=ra.get('planned_misses') or 0, rb.get('planned_misses') or 0
    f=k[4]
    t=tot.setdefault(f,[0,0]); t[0]+=fa; t[1]+=fb
    if fa!=fb: print('MISSES',k,fa,'->',fb)
print('totals by fraction (old,new):',tot)
print('verdicts new:', {v:sum(1 for r in b.values() if r['verdict']==v) for v in set(r['verdict'] for r in b.values())})
